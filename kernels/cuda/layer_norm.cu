// LayerNormalization: one warp per row, two passes (mean, then centered variance) in FP32,
// like the CPU kernel.
#include <cmath>

#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

__global__ void LayerNormKernel(const float* x, const float* scale, const float* bias, float* y,
                                float* mean_out, float* inv_out, int64_t rows, int64_t cols,
                                float epsilon) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = GridThreads() / 32;
  for (int64_t row = GlobalThread() / 32; row < rows; row += warps) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    float sum = 0.0f;
    for (int64_t i = lane; i < cols; i += 32) sum += xr[i];
    const float mean = cols > 0 ? WarpSum(sum) / static_cast<float>(cols) : 0.0f;
    float sq = 0.0f;
    for (int64_t i = lane; i < cols; i += 32) {
      const float d = xr[i] - mean;
      sq += d * d;
    }
    const float var = cols > 0 ? WarpSum(sq) / static_cast<float>(cols) : 0.0f;
    const float inv = 1.0f / sqrtf(var + epsilon);
    for (int64_t i = lane; i < cols; i += 32) {
      const float v = (xr[i] - mean) * inv * scale[i];
      yr[i] = bias != nullptr ? v + bias[i] : v;
    }
    if (lane == 0) {
      if (mean_out != nullptr) mean_out[row] = mean;
      if (inv_out != nullptr) inv_out[row] = inv;
    }
  }
}

}  // namespace

cudaError_t LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y,
                            float* mean, float* inv_std, int64_t rows, int64_t cols, float epsilon,
                            cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  LayerNormKernel<<<GridFor(rows * 32), kBlock, 0, stream>>>(x, scale, bias, y, mean, inv_std, rows,
                                                             cols, epsilon);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
