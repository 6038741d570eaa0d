// OneHot: one thread per output element, on_value where its class is its index's
// (negative indices counting from the end), off_value elsewhere; an index outside
// [-depth, depth) gives an all-off row.
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/launchers.h"

namespace ndserve::kernels::gpu {
namespace {

template <typename T, typename I>
__global__ void OneHotKernel(const I* idx, T* y, OneHotArgs a, int64_t total) {
  const T off = static_cast<T>(a.off), on = static_cast<T>(a.on);
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t in = i % a.inner;
    const int64_t d = (i / a.inner) % a.depth;
    const int64_t o = i / (a.inner * a.depth);
    int64_t v = static_cast<int64_t>(idx[o * a.inner + in]);
    if (v < 0) v += a.depth;
    y[i] = v == d ? on : off;
  }
}

template <typename T>
cudaError_t Launch(const void* indices, bool int64_indices, void* out, const OneHotArgs& a,
                   int64_t total, cudaStream_t stream) {
  if (int64_indices) {
    OneHotKernel<T, int64_t><<<GridFor(total), kBlock, 0, stream>>>(
        static_cast<const int64_t*>(indices), static_cast<T*>(out), a, total);
  } else {
    OneHotKernel<T, int32_t><<<GridFor(total), kBlock, 0, stream>>>(
        static_cast<const int32_t*>(indices), static_cast<T*>(out), a, total);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchOneHot(ScalarType type, const void* indices, bool int64_indices, void* out,
                         const OneHotArgs& a, cudaStream_t stream) {
  const int64_t total = a.outer * a.depth * a.inner;
  if (total == 0) return cudaSuccess;
  switch (type) {
    case ScalarType::kFp32:
      return Launch<float>(indices, int64_indices, out, a, total, stream);
    case ScalarType::kInt32:
      return Launch<int32_t>(indices, int64_indices, out, a, total, stream);
    case ScalarType::kInt64:
      return Launch<int64_t>(indices, int64_indices, out, a, total, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace ndserve::kernels::gpu
