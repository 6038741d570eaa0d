#ifndef NDSERVE_KERNELS_CUDA_TRAIN_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_TRAIN_LAUNCHERS_H_

// Raw launchers of the training kernels (train_backward.cu, train_optimizer.cu): plain
// pointers in, the launch's cudaError_t out, no Abseil (see launchers.h). The entry
// points in train_kernels.cc validate and call these. Each queues on `stream`.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ndserve::kernels::gpu {

// kind: 0 Relu, 1 Sigmoid, 2 Tanh; saved is the output y.
cudaError_t LaunchActivationBackward(int kind, const float* saved, const float* dy, float* dx,
                                     int64_t n, bool accumulate, cudaStream_t stream);
cudaError_t LaunchSoftmaxBackward(bool log, const float* y, const float* dy, float* dx,
                                  int64_t rows, int64_t cols, bool accumulate, cudaStream_t stream);
// *loss must be zero before (the launcher's caller clears it on the stream); rows of
// cross-entropy add their share atomically. Bad labels set *error_flag.
cudaError_t LaunchCrossEntropy(const float* x, const int64_t* labels, int64_t rows, int64_t cols,
                               float* loss, float* grad, int32_t* error_flag, cudaStream_t stream);
// kind: 1 BCE with logits, 2 MSE; the mean over n elements.
cudaError_t LaunchElementwiseLoss(int kind, const float* x, const float* t, int64_t n, float* loss,
                                  float* grad, cudaStream_t stream);
cudaError_t LaunchSumRows(const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate,
                          cudaStream_t stream);
cudaError_t LaunchAddRows(const int64_t* ids, int64_t count, const float* grad, int64_t width,
                          float* table_grad, int64_t table_rows, int32_t* error_flag,
                          cudaStream_t stream);
cudaError_t LaunchLayerNormBackward(const float* xhat, const float* scale, const float* inv_std,
                                    const float* dy, int64_t rows, int64_t cols, float* dx,
                                    float* dscale, float* dbias, bool accumulate,
                                    cudaStream_t stream);
cudaError_t LaunchSgdUpdate(float lr, float momentum, float weight_decay, bool nesterov,
                            bool first_step, float* w, const float* g, float* buf, int64_t n,
                            cudaStream_t stream);
cudaError_t LaunchAdamUpdate(float step_size, float sqrt_c2, float beta1, float beta2,
                             float epsilon, float weight_decay, float* w, const float* g, float* m,
                             float* v, int64_t n, cudaStream_t stream);
// *out (+)= sum x^2; *out must be cleared first when not accumulating (done here).
cudaError_t LaunchSumSquares(const float* x, int64_t n, float* out, bool accumulate,
                             cudaStream_t stream);
// Over rows `rows[0..count)` of [*, width] arrays (rows on the device).
cudaError_t LaunchSgdUpdateRows(float lr, float weight_decay, float* w, const float* g,
                                const int64_t* rows, int64_t count, int64_t width,
                                cudaStream_t stream);
cudaError_t LaunchSumSquaresRows(const float* x, const int64_t* rows, int64_t count, int64_t width,
                                 float* out, bool accumulate, cudaStream_t stream);
cudaError_t LaunchFill(float* dst, int64_t n, float value, cudaStream_t stream);
// dst (+)= alpha src, elementwise (src == dst allowed).
cudaError_t LaunchAxpy(float alpha, const float* src, float* dst, int64_t n, bool accumulate,
                       cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_TRAIN_LAUNCHERS_H_
