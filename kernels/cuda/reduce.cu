// ReduceSum / ReduceMean: one thread per output element, summing its reduced elements in
// FP32. A single merged reduced dim (the common case) walks it with one stride.
#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

__global__ void ReduceKernel(const float* x, float* y, IndexMap kept, IndexMap reduced,
                             int64_t out_n, int64_t reduce_n, float scale) {
  for (int64_t o = GlobalThread(); o < out_n; o += GridThreads()) {
    const float* base = x + MapOffset0(kept, o);
    float sum = 0.0f;
    if (reduced.rank == 1) {
      const int64_t s = reduced.strides[0][0];
      for (int64_t r = 0; r < reduce_n; ++r) sum += base[r * s];
    } else {
      for (int64_t r = 0; r < reduce_n; ++r) sum += base[MapOffset0(reduced, r)];
    }
    y[o] = sum * scale;
  }
}

}  // namespace

cudaError_t LaunchReduce(const float* x, float* y, const IndexMap& kept, const IndexMap& reduced,
                         int64_t out_n, int64_t reduce_n, float scale, cudaStream_t stream) {
  if (out_n == 0) return cudaSuccess;
  ReduceKernel<<<GridFor(out_n), kBlock, 0, stream>>>(x, y, kept, reduced, out_n, reduce_n, scale);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
