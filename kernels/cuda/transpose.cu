// Transpose: one thread per output element, reading through the merged input strides.
#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

template <typename E>
__global__ void TransposeKernel(const E* x, E* y, IndexMap map, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) y[i] = x[MapOffset0(map, i)];
}

template <typename E>
cudaError_t Launch(const void* x, void* y, const IndexMap& map, int64_t n, cudaStream_t stream) {
  TransposeKernel<E>
      <<<GridFor(n), kBlock, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(y), map, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchTranspose(const void* x, void* y, int elem_bytes, const IndexMap& map, int64_t n,
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return Launch<uint8_t>(x, y, map, n, stream);
    case 2:
      return Launch<uint16_t>(x, y, map, n, stream);
    case 4:
      return Launch<uint32_t>(x, y, map, n, stream);
    case 8:
      return Launch<uint64_t>(x, y, map, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ndserve::kernels::gpu
