#ifndef NDSERVE_KERNELS_TRAIN_KERNELS_H_
#define NDSERVE_KERNELS_TRAIN_KERNELS_H_

// The math training needs besides the forward kernels (docs/design.md §10.2): the
// backward of the ops train/ records, the three losses and the optimizer updates, as one
// table per device kind, like the forward kernels' (dispatch.h). Raw FP32 pointers on
// the context's device: the caller owns and sizes every buffer (train/ allocates them in
// its batch or trainer scope), and no entry allocates. CUDA entries queue on the
// context's stream (cuBLAS on its handle) and return before they have run; the caller
// synchronizes before it reads a result or frees a buffer. `accumulate`: add into the
// destination (a gradient that already holds another consumer's share) instead of
// writing it.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/kernel_context.h"
#include "memory/device.h"

namespace ndserve::kernels {

enum class ActivationKind { kRelu, kSigmoid, kTanh };
enum class TrainLossKind { kCrossEntropy, kBceWithLogits, kMse };

// torch.optim.SGD's rule: d = g + weight_decay w; with momentum, buf = d on the first
// step, else momentum buf + d, and d = buf (Nesterov: d + momentum buf); w -= lr d.
struct SgdStep {
  float lr = 0.0f;
  float momentum = 0.0f;  // 0: no buffer (momentum_buf may be null)
  float weight_decay = 0.0f;
  bool nesterov = false;
  bool first_step = false;
};

// torch.optim.Adam's rule with bias correction folded in by the caller:
// m = b1 m + (1-b1) d, v = b2 v + (1-b2) d^2, w -= step_size m / (sqrt(v) / sqrt_c2 + eps),
// where d = g + weight_decay w, step_size = lr / (1 - b1^t), sqrt_c2 = sqrt(1 - b2^t).
struct AdamStep {
  float step_size = 0.0f;
  float sqrt_c2 = 1.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weight_decay = 0.0f;
};

struct TrainKernels {
  // c[m,n] = alpha op(a) op(b) + beta c, all row-major; a is [m,k] ([k,m] when trans_a),
  // b is [k,n] ([n,k] when trans_b). Gemm's and MatMul's backward are two of these.
  absl::Status (*gemm)(const KernelContext& ctx, bool trans_a, bool trans_b, std::int64_t m,
                       std::int64_t n, std::int64_t k, float alpha, const float* a, const float* b,
                       float beta, float* c);
  // dx (+)= dy f'(x), from the output y = f(x) (for Relu, y > 0 exactly where x > 0).
  absl::Status (*activation_backward)(const KernelContext& ctx, ActivationKind kind,
                                      const float* saved, const float* dy, float* dx,
                                      std::int64_t n, bool accumulate);
  // Softmax (or LogSoftmax, `log`) over the last axis of [rows, cols] with output y:
  // dx (+)= y (dy - sum(dy y)), or dy - exp(y) sum(dy).
  absl::Status (*softmax_backward)(const KernelContext& ctx, bool log, const float* y,
                                   const float* dy, float* dx, std::int64_t rows, std::int64_t cols,
                                   bool accumulate);
  // The mean loss (one float written at `loss`) and d loss / d prediction (written at
  // `grad`, prediction's shape). Cross-entropy: prediction [rows, cols] logits, labels
  // INT64 [rows] class ids; the others: labels FP32 of prediction's shape, the mean over
  // every element. A label outside [0, cols) is INVALID_ARGUMENT on the CPU; on CUDA it
  // sets ctx.error_flag (required there), contributes nothing, and the caller reads the
  // flag once it has synchronized.
  absl::Status (*loss)(const KernelContext& ctx, TrainLossKind kind, const float* prediction,
                       const void* labels, std::int64_t rows, std::int64_t cols, float* loss,
                       float* grad);
  // dst[j] (+)= sum over r of src[r cols + j]: a bias's gradient (Gemm's C, Add's
  // broadcast operand, LayerNorm's bias).
  absl::Status (*sum_rows)(const KernelContext& ctx, const float* src, std::int64_t rows,
                           std::int64_t cols, float* dst, bool accumulate);
  // Gather's (embedding) backward: table_grad[ids[i]] += grad[i] row by row, rows of
  // `width`; repeated ids add up (atomics on CUDA). A negative id counts from the end, as
  // in ONNX Gather; one outside [-table_rows, table_rows) is INVALID_ARGUMENT on the CPU
  // and sets ctx.error_flag on CUDA, as `loss`.
  absl::Status (*add_rows)(const KernelContext& ctx, const std::int64_t* ids, std::int64_t count,
                           const float* grad, std::int64_t width, float* table_grad,
                           std::int64_t table_rows);
  // LayerNormalization over the last axis of [rows, cols], given what the forward keeps:
  // xhat = (x - mean) / std and each row's 1/std. dx (+)= inv_std (g - mean(g) -
  // xhat mean(g xhat)) with g = dy scale; dscale (+)= column sums of dy xhat, dbias (+)=
  // of dy. dx, dscale or dbias may be null (not wanted).
  absl::Status (*layer_norm_backward)(const KernelContext& ctx, const float* xhat,
                                      const float* scale, const float* inv_std, const float* dy,
                                      std::int64_t rows, std::int64_t cols, float* dx,
                                      float* dscale, float* dbias, bool accumulate);
  // One parameter's update, in place (buffers the parameter's size).
  absl::Status (*sgd_update)(const KernelContext& ctx, const SgdStep& step, float* w,
                             const float* g, float* momentum_buf, std::int64_t n);
  absl::Status (*adam_update)(const KernelContext& ctx, const AdamStep& step, float* w,
                              const float* g, float* m, float* v, std::int64_t n);
  // *out (+)= sum of x^2 (the gradient norm, one float on the device).
  absl::Status (*sum_squares)(const KernelContext& ctx, const float* x, std::int64_t n, float* out,
                              bool accumulate);
  // The row-sparse forms of sgd_update (without momentum) and sum_squares, for an
  // embedding table whose gradient only some rows received: rows `rows[0..count)`
  // (distinct, any order, each in [0, table rows)) of [table rows, width] arrays.
  absl::Status (*sgd_update_rows)(const KernelContext& ctx, const SgdStep& step, float* w,
                                  const float* g, const std::int64_t* rows, std::int64_t count,
                                  std::int64_t width);
  absl::Status (*sum_squares_rows)(const KernelContext& ctx, const float* x,
                                   const std::int64_t* rows, std::int64_t count,
                                   std::int64_t width, float* out, bool accumulate);
  // dst[i] = value: zeroing gradients in place, the root gradient of 1.
  absl::Status (*fill)(const KernelContext& ctx, float* dst, std::int64_t n, float value);
  // dst (+)= alpha src over n elements: handing a gradient on, adding one consumer's
  // share to another's, scaling a reduced gradient, copying a value. src and dst may be
  // the same buffer, not partly overlapping ones.
  absl::Status (*axpy)(const KernelContext& ctx, float alpha, const float* src, float* dst,
                       std::int64_t n, bool accumulate);
};

// The table for `kind`: the CPU always; CUDA when the build has the CUDA backend
// (FAILED_PRECONDITION otherwise); UNIMPLEMENTED for a device kind no kernel runs on.
absl::StatusOr<const TrainKernels*> LookupTrainKernels(DeviceKind kind);

namespace cpu {
const TrainKernels& TrainKernelTable();
}  // namespace cpu
namespace gpu {
// Defined only when the build has the CUDA backend; use LookupTrainKernels.
const TrainKernels& TrainKernelTable();
}  // namespace gpu

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_TRAIN_KERNELS_H_
