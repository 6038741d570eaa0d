// The CUDA training math (kernels/train_kernels.h): validation, cuBLAS for the products
// and the launches of train_backward.cu / train_optimizer.cu. Every CUDA and cuBLAS
// return code becomes a Status (allocation failures RESOURCE_EXHAUSTED); nothing aborts.
#include "kernels/train_kernels.h"

#include <cublas_v2.h>

#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cublas_util.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/error_flag.h"
#include "kernels/cuda/train_launchers.h"

namespace ndserve::kernels::gpu {
namespace {

// The context is a CUDA one, made current; sizes are not negative; a buffer needed for a
// non-empty call is set.
absl::Status Prepare(const KernelContext& ctx, absl::string_view op,
                     std::initializer_list<std::int64_t> sizes,
                     std::initializer_list<const void*> buffers) {
  if (!ctx.device.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": the CUDA training math got a context on ", ctx.device.ToString()));
  }
  bool empty = false;
  for (std::int64_t s : sizes) {
    if (s < 0) return absl::InvalidArgumentError(absl::StrCat(op, ": negative size ", s));
    empty = empty || s == 0;
  }
  if (!empty) {
    for (const void* p : buffers) {
      if (p == nullptr) return absl::InvalidArgumentError(absl::StrCat(op, ": a buffer is null"));
    }
  }
  return ActivateDevice(ctx);
}

absl::Status Gemm(const KernelContext& ctx, bool trans_a, bool trans_b, std::int64_t m,
                  std::int64_t n, std::int64_t k, float alpha, const float* a, const float* b,
                  float beta, float* c) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "training Gemm", {m, n, k}, {a, b, c}));
  NDS_RETURN_IF_ERROR(CheckIntDims("training Gemm", m, n, k));
  if (m == 0 || n == 0) return absl::OkStatus();
  NDS_ASSIGN_OR_RETURN(cublasHandle_t handle, HandleOf("training Gemm", ctx));
  if (k == 0) {
    // No product: c = beta c (cuBLAS is not asked with k = 0).
    if (beta == 0.0f) {
      return CudaStatus(
          cudaMemsetAsync(c, 0, static_cast<std::size_t>(m * n) * sizeof(float), StreamOf(ctx)),
          "training Gemm cudaMemsetAsync");
    }
    const int count = static_cast<int>(m * n);
    if (m * n > INT_MAX)
      return absl::UnimplementedError("training Gemm: C exceeds the cuBLAS range");
    const cublasStatus_t st = cublasSscal(handle, count, &beta, c, 1);
    if (st == CUBLAS_STATUS_ALLOC_FAILED) {
      return absl::ResourceExhaustedError("cuBLAS training Gemm cublasSscal: allocation failed");
    }
    return CublasStatus(st, "training Gemm cublasSscal");
  }
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  const cublasStatus_t st =
      cublasSgemm(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                  static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
                  static_cast<int>(trans_b ? k : n), a, static_cast<int>(trans_a ? m : k), &beta, c,
                  static_cast<int>(n));
  if (st == CUBLAS_STATUS_ALLOC_FAILED) {
    return absl::ResourceExhaustedError("cuBLAS training Gemm cublasSgemm: allocation failed");
  }
  return CublasStatus(st, "training Gemm cublasSgemm");
}

absl::Status ActivationBackward(const KernelContext& ctx, ActivationKind kind, const float* saved,
                                const float* dy, float* dx, std::int64_t n, bool accumulate) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "activation backward", {n}, {saved, dy, dx}));
  return CudaStatus(
      LaunchActivationBackward(static_cast<int>(kind), saved, dy, dx, n, accumulate, StreamOf(ctx)),
      "activation backward launch");
}

absl::Status SoftmaxBackward(const KernelContext& ctx, bool log, const float* y, const float* dy,
                             float* dx, std::int64_t rows, std::int64_t cols, bool accumulate) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "softmax backward", {rows, cols}, {y, dy, dx}));
  return CudaStatus(LaunchSoftmaxBackward(log, y, dy, dx, rows, cols, accumulate, StreamOf(ctx)),
                  "softmax backward launch");
}

absl::Status Loss(const KernelContext& ctx, TrainLossKind kind, const float* x, const void* labels,
                  std::int64_t rows, std::int64_t cols, float* loss, float* grad) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "training loss", {rows, cols}, {x, labels, grad}));
  if (loss == nullptr) return absl::InvalidArgumentError("training loss: the loss buffer is null");
  // The kernels add their shares into *loss.
  NDS_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(loss, 0, sizeof(float), StreamOf(ctx)),
                               "training loss cudaMemsetAsync"));
  if (kind == TrainLossKind::kCrossEntropy) {
    NDS_RETURN_IF_ERROR(RequireErrorFlag(ctx, "CrossEntropyLoss"));
    return CudaStatus(LaunchCrossEntropy(x, static_cast<const std::int64_t*>(labels), rows, cols,
                                       loss, grad, ctx.error_flag, StreamOf(ctx)),
                    "CrossEntropyLoss launch");
  }
  return CudaStatus(LaunchElementwiseLoss(kind == TrainLossKind::kBceWithLogits ? 1 : 2, x,
                                        static_cast<const float*>(labels), rows * cols, loss, grad,
                                        StreamOf(ctx)),
                  "training loss launch");
}

absl::Status SumRows(const KernelContext& ctx, const float* src, std::int64_t rows,
                     std::int64_t cols, float* dst, bool accumulate) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "row sum", {cols}, {dst}));
  if (rows > 0 && src == nullptr) return absl::InvalidArgumentError("row sum: a buffer is null");
  return CudaStatus(LaunchSumRows(src, rows, cols, dst, accumulate, StreamOf(ctx)), "row sum launch");
}

absl::Status AddRows(const KernelContext& ctx, const std::int64_t* ids, std::int64_t count,
                     const float* grad, std::int64_t width, float* table_grad,
                     std::int64_t table_rows) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "Gather backward", {count, width}, {ids, grad, table_grad}));
  NDS_RETURN_IF_ERROR(RequireErrorFlag(ctx, "Gather backward"));
  return CudaStatus(
      LaunchAddRows(ids, count, grad, width, table_grad, table_rows, ctx.error_flag, StreamOf(ctx)),
      "Gather backward launch");
}

absl::Status LayerNormBackward(const KernelContext& ctx, const float* xhat, const float* scale,
                               const float* inv_std, const float* dy, std::int64_t rows,
                               std::int64_t cols, float* dx, float* dscale, float* dbias,
                               bool accumulate) {
  NDS_RETURN_IF_ERROR(
      Prepare(ctx, "LayerNormalization backward", {rows, cols}, {xhat, scale, inv_std, dy}));
  return CudaStatus(LaunchLayerNormBackward(xhat, scale, inv_std, dy, rows, cols, dx, dscale, dbias,
                                          accumulate, StreamOf(ctx)),
                  "LayerNormalization backward launch");
}

absl::Status SgdUpdate(const KernelContext& ctx, const SgdStep& o, float* w, const float* g,
                       float* buf, std::int64_t n) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "SGD update", {n}, {w, g}));
  if (o.momentum > 0.0f && buf == nullptr && n > 0) {
    return absl::InvalidArgumentError("SGD with momentum needs its buffer");
  }
  return CudaStatus(LaunchSgdUpdate(o.lr, o.momentum, o.weight_decay, o.nesterov, o.first_step, w, g,
                                  buf, n, StreamOf(ctx)),
                  "SGD update launch");
}

absl::Status AdamUpdate(const KernelContext& ctx, const AdamStep& o, float* w, const float* g,
                        float* m, float* v, std::int64_t n) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "Adam update", {n}, {w, g, m, v}));
  return CudaStatus(LaunchAdamUpdate(o.step_size, o.sqrt_c2, o.beta1, o.beta2, o.epsilon,
                                   o.weight_decay, w, g, m, v, n, StreamOf(ctx)),
                  "Adam update launch");
}

absl::Status SumSquares(const KernelContext& ctx, const float* x, std::int64_t n, float* out,
                        bool accumulate) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "sum of squares", {n}, {x}));
  if (out == nullptr) return absl::InvalidArgumentError("sum of squares: the output is null");
  return CudaStatus(LaunchSumSquares(x, n, out, accumulate, StreamOf(ctx)), "sum of squares launch");
}

absl::Status SgdUpdateRows(const KernelContext& ctx, const SgdStep& o, float* w, const float* g,
                           const std::int64_t* rows, std::int64_t count, std::int64_t width) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "row-sparse SGD update", {count, width}, {w, g, rows}));
  if (o.momentum > 0.0f) {
    return absl::InvalidArgumentError("row-sparse SGD has no momentum buffer");
  }
  return CudaStatus(LaunchSgdUpdateRows(o.lr, o.weight_decay, w, g, rows, count, width,
                                        StreamOf(ctx)),
                    "row-sparse SGD update launch");
}

absl::Status SumSquaresRows(const KernelContext& ctx, const float* x, const std::int64_t* rows,
                            std::int64_t count, std::int64_t width, float* out, bool accumulate) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "row-sparse sum of squares", {count, width}, {x, rows}));
  if (out == nullptr) {
    return absl::InvalidArgumentError("row-sparse sum of squares: the output is null");
  }
  return CudaStatus(LaunchSumSquaresRows(x, rows, count, width, out, accumulate, StreamOf(ctx)),
                    "row-sparse sum of squares launch");
}

absl::Status Fill(const KernelContext& ctx, float* dst, std::int64_t n, float value) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "fill", {n}, {dst}));
  return CudaStatus(LaunchFill(dst, n, value, StreamOf(ctx)), "fill launch");
}

absl::Status Axpy(const KernelContext& ctx, float alpha, const float* src, float* dst,
                  std::int64_t n, bool accumulate) {
  NDS_RETURN_IF_ERROR(Prepare(ctx, "axpy", {n}, {src, dst}));
  return CudaStatus(LaunchAxpy(alpha, src, dst, n, accumulate, StreamOf(ctx)), "axpy launch");
}

constexpr TrainKernels kTable = {
    .gemm = Gemm,
    .activation_backward = ActivationBackward,
    .softmax_backward = SoftmaxBackward,
    .loss = Loss,
    .sum_rows = SumRows,
    .add_rows = AddRows,
    .layer_norm_backward = LayerNormBackward,
    .sgd_update = SgdUpdate,
    .adam_update = AdamUpdate,
    .sum_squares = SumSquares,
    .sgd_update_rows = SgdUpdateRows,
    .sum_squares_rows = SumSquaresRows,
    .fill = Fill,
    .axpy = Axpy,
};

}  // namespace

const TrainKernels& TrainKernelTable() { return kTable; }

}  // namespace ndserve::kernels::gpu
