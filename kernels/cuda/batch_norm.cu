// BatchNormalization (inference): one thread per element.
#include <cmath>

#include "kernels/cuda/conv_launchers.h"
#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

__global__ void BatchNormKernel(const float* x, const float* scale, const float* bias,
                                const float* mean, const float* var, float* y, int64_t c,
                                int64_t inner, float epsilon, int64_t total) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t ch = (i / inner) % c;
    const float a = scale[ch] / sqrtf(var[ch] + epsilon);
    y[i] = x[i] * a + (bias[ch] - mean[ch] * a);
  }
}

}  // namespace

cudaError_t LaunchBatchNorm(const float* x, const float* scale, const float* bias,
                            const float* mean, const float* var, float* y, int64_t n, int64_t c,
                            int64_t inner, float epsilon, cudaStream_t stream) {
  const int64_t total = n * c * inner;
  if (total == 0) return cudaSuccess;
  BatchNormKernel<<<GridFor(total), kBlock, 0, stream>>>(x, scale, bias, mean, var, y, c, inner,
                                                         epsilon, total);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
