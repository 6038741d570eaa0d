// The elementwise training kernels (kernels/train_kernels.h): optimizer updates in place,
// with torch.optim's rules as the CPU table's loops, and the fill and axpy that move
// gradients between buffers.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/train_launchers.h"

namespace ndserve::kernels::gpu {
namespace {

__global__ void SgdKernel(float lr, float momentum, float weight_decay, bool nesterov,
                          bool first_step, float* w, const float* g, float* buf, int64_t n) {
  for (int64_t j = GlobalThread(); j < n; j += GridThreads()) {
    float d = g[j] + weight_decay * w[j];
    if (momentum > 0.0f) {
      buf[j] = first_step ? d : momentum * buf[j] + d;
      d = nesterov ? d + momentum * buf[j] : buf[j];
    }
    w[j] -= lr * d;
  }
}

__global__ void AdamKernel(float step_size, float sqrt_c2, float beta1, float beta2, float epsilon,
                           float weight_decay, float* w, const float* g, float* m, float* v,
                           int64_t n) {
  for (int64_t j = GlobalThread(); j < n; j += GridThreads()) {
    const float d = g[j] + weight_decay * w[j];
    m[j] = beta1 * m[j] + (1.0f - beta1) * d;
    v[j] = beta2 * v[j] + (1.0f - beta2) * d * d;
    w[j] -= step_size * m[j] / (sqrtf(v[j]) / sqrt_c2 + epsilon);
  }
}

__global__ void SgdRowsKernel(float lr, float weight_decay, float* w, const float* g,
                              const int64_t* rows, int64_t count, int64_t width) {
  const int64_t n = count * width;
  for (int64_t e = GlobalThread(); e < n; e += GridThreads()) {
    const int64_t i = e / width;
    const int64_t at = rows[i] * width + (e - i * width);
    w[at] -= lr * (g[at] + weight_decay * w[at]);
  }
}

__global__ void FillKernel(float* dst, int64_t n, float value) {
  for (int64_t j = GlobalThread(); j < n; j += GridThreads()) dst[j] = value;
}

__global__ void AxpyKernel(float alpha, const float* src, float* dst, int64_t n, bool accumulate) {
  for (int64_t j = GlobalThread(); j < n; j += GridThreads()) {
    const float v = alpha * src[j];
    dst[j] = accumulate ? dst[j] + v : v;
  }
}

}  // namespace

cudaError_t LaunchSgdUpdateRows(float lr, float weight_decay, float* w, const float* g,
                                const int64_t* rows, int64_t count, int64_t width,
                                cudaStream_t stream) {
  const int64_t n = count * width;
  if (n == 0) return cudaSuccess;
  SgdRowsKernel<<<GridFor(n), kBlock, 0, stream>>>(lr, weight_decay, w, g, rows, count, width);
  return cudaGetLastError();
}

cudaError_t LaunchFill(float* dst, int64_t n, float value, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FillKernel<<<GridFor(n), kBlock, 0, stream>>>(dst, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchAxpy(float alpha, const float* src, float* dst, int64_t n, bool accumulate,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AxpyKernel<<<GridFor(n), kBlock, 0, stream>>>(alpha, src, dst, n, accumulate);
  return cudaGetLastError();
}

cudaError_t LaunchSgdUpdate(float lr, float momentum, float weight_decay, bool nesterov,
                            bool first_step, float* w, const float* g, float* buf, int64_t n,
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SgdKernel<<<GridFor(n), kBlock, 0, stream>>>(lr, momentum, weight_decay, nesterov, first_step, w,
                                               g, buf, n);
  return cudaGetLastError();
}

cudaError_t LaunchAdamUpdate(float step_size, float sqrt_c2, float beta1, float beta2,
                             float epsilon, float weight_decay, float* w, const float* g, float* m,
                             float* v, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AdamKernel<<<GridFor(n), kBlock, 0, stream>>>(step_size, sqrt_c2, beta1, beta2, epsilon,
                                                weight_decay, w, g, m, v, n);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
