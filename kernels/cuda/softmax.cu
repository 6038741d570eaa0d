// Softmax over one axis. Last axis (inner == 1): one warp per row with shuffle
// reductions. Other axes: one thread per (outer, inner) column, strided over the axis.
#include <cmath>

#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

__global__ void SoftmaxRowsKernel(const float* x, float* y, int64_t rows, int64_t n) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = GridThreads() / 32;
  // The row loop is warp-uniform, so every lane reaches the shuffles.
  for (int64_t row = GlobalThread() / 32; row < rows; row += warps) {
    const float* xr = x + row * n;
    float* yr = y + row * n;
    float mx = -INFINITY;
    for (int64_t i = lane; i < n; i += 32) mx = fmaxf(mx, xr[i]);
    mx = WarpMax(mx);
    float sum = 0.0f;
    for (int64_t i = lane; i < n; i += 32) sum += expf(xr[i] - mx);
    const float inv = 1.0f / WarpSum(sum);
    for (int64_t i = lane; i < n; i += 32) yr[i] = expf(xr[i] - mx) * inv;
  }
}

__global__ void SoftmaxColumnsKernel(const float* x, float* y, int64_t outer, int64_t n,
                                     int64_t inner) {
  for (int64_t c = GlobalThread(); c < outer * inner; c += GridThreads()) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) mx = fmaxf(mx, x[base + i * inner]);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += expf(x[base + i * inner] - mx);
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) y[base + i * inner] = expf(x[base + i * inner] - mx) * inv;
  }
}

}  // namespace

cudaError_t LaunchSoftmax(const float* x, float* y, int64_t outer, int64_t axis_dim, int64_t inner,
                          cudaStream_t stream) {
  if (outer * axis_dim * inner == 0) return cudaSuccess;
  if (inner == 1) {
    SoftmaxRowsKernel<<<GridFor(outer * 32), kBlock, 0, stream>>>(x, y, outer, axis_dim);
  } else {
    SoftmaxColumnsKernel<<<GridFor(outer * inner), kBlock, 0, stream>>>(x, y, outer, axis_dim,
                                                                        inner);
  }
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
