// Gemm and MatMul through cuBLAS. cuBLAS is column-major: a row-major M x N result Y is a
// column-major N x M matrix Y^T = op(B)^T op(A)^T, so every call swaps the operands. A
// per-column bias and a Relu go into cuBLASLt's epilogue where the predictor allows it
// (gemm_lt.h: one kernel); otherwise a fused node's bias and activation
// (kernels/gemm_epilogue.h) are one more kernel after the product (gemm_epilogue.cu).
#include <cublas_v2.h>

#include <climits>
#include <variant>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/cuda/cublas_util.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/gemm_launchers.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/plans.h"

namespace ndserve::kernels::gpu {
namespace {

absl::Status Epilogue(const KernelContext& ctx, const TensorView& y, const float* bias,
                      const GemmEpilogue& e) {
  if (bias == nullptr && e.activation == GemmActivation::kNone) return absl::OkStatus();
  const int64_t cols = y.shape.empty() ? 1 : y.shape.back();
  const int64_t rows = cols == 0 ? 0 : y.numel() / cols;
  return CudaStatus(LaunchGemmEpilogue(y.as<float>(), bias, rows, cols, e, StreamOf(ctx)),
                    "Gemm epilogue launch");
}

// Y = A x B with numpy batch broadcasting; no epilogue.
absl::Status MatMulProduct(const KernelContext& ctx, absl::Span<const TensorView> in,
                           absl::Span<const TensorView> out) {
  const MatMulPlan p = MakeMatMulPlan(in[0].shape, in[1].shape);
  NDS_ASSIGN_OR_RETURN(cublasHandle_t handle, HandleOf("MatMul", ctx));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const float* a = in[0].as<const float>();
  const float* b = in[1].as<const float>();
  float* y = out[0].as<float>();
  if (p.batch * p.m * p.n == 0) return absl::OkStatus();
  if (p.k == 0) {
    return CudaStatus(cudaMemsetAsync(y, 0, out[0].nbytes(), StreamOf(ctx)),
                      "MatMul cudaMemsetAsync");
  }
  const float one = 1.0f, zero = 0.0f;
  if (p.fold_batch_into_m) {
    NDS_RETURN_IF_ERROR(CheckIntDims("MatMul", p.batch * p.m, p.n, p.k));
    return CublasStatus(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(p.n),
                                    static_cast<int>(p.batch * p.m), static_cast<int>(p.k), &one, b,
                                    static_cast<int>(p.n), a, static_cast<int>(p.k), &zero, y,
                                    static_cast<int>(p.n)),
                        "MatMul cublasSgemm");
  }
  NDS_RETURN_IF_ERROR(CheckIntDims("MatMul", p.m, p.n, p.k));
  // The innermost merged batch dim is one strided-batched call (stride 0 broadcasts);
  // any outer batch dims loop on the host.
  const std::size_t rank = p.batch_dims.size();
  const int64_t inner = rank == 0 ? 1 : p.batch_dims.back();
  const int64_t sa = rank == 0 ? 0 : p.a_batch_strides.back();
  const int64_t sb = rank == 0 ? 0 : p.b_batch_strides.back();
  if (inner > INT_MAX) return absl::UnimplementedError("MatMul: batch exceeds the cuBLAS range");
  for (int64_t outer = 0; outer < p.batch / inner; ++outer) {
    int64_t oa = 0, ob = 0, rest = outer;
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      const int64_t idx = rest % p.batch_dims[d];
      rest /= p.batch_dims[d];
      oa += idx * p.a_batch_strides[d];
      ob += idx * p.b_batch_strides[d];
    }
    NDS_RETURN_IF_ERROR(CublasStatus(
        cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(p.n),
                                  static_cast<int>(p.m), static_cast<int>(p.k), &one, b + ob,
                                  static_cast<int>(p.n), sb, a + oa, static_cast<int>(p.k), sa,
                                  &zero, y + outer * inner * p.m * p.n, static_cast<int>(p.n),
                                  p.m * p.n, static_cast<int>(inner)),
        "MatMul cublasSgemmStridedBatched"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Gemm(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const GemmAttrs& a = std::get<GemmAttrs>(attrs);
  const GemmPlan p = MakeGemmPlan(in[0].shape, in[1].shape, a);
  NDS_RETURN_IF_ERROR(CheckIntDims("Gemm", p.m, p.n, p.k));
  NDS_ASSIGN_OR_RETURN(cublasHandle_t handle, HandleOf("Gemm", ctx));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  float* y = out[0].as<float>();
  if (p.m == 0 || p.n == 0) return absl::OkStatus();
  const bool use_c = in.size() == 3 && a.beta != 0.0f;  // beta == 0 drops C, as on the CPU
  // C as a bias of one value per column, added as it stands: the exporters' Linear.
  const bool c_is_bias = use_c && a.beta == 1.0f && in[2].numel() == p.n &&
                         (in[2].shape.size() == 1 ||
                          (in[2].shape.size() == 2 && in[2].shape[0] == 1));
  if ((!use_c || c_is_bias) && a.alpha != 0.0f) {
    LtProduct lt{p.m, p.n, p.k, a.trans_a, a.trans_b, in[0].as<const float>(),
                 in[1].as<const float>(), y, a.alpha,
                 c_is_bias ? in[2].as<const float>() : nullptr, a.epilogue.activation};
    NDS_ASSIGN_OR_RETURN(const bool done, TryLtProduct(ctx, lt));
    if (done) return absl::OkStatus();
  }
  if (use_c) {
    const Shape out_shape = {p.m, p.n};
    const BroadcastPlan bp = MakeBroadcastPlan(out_shape, in[2].shape, in[2].shape);
    NDS_ASSIGN_OR_RETURN(IndexMap map, MakeIndexMap("Gemm", bp.dims, bp.a_strides));
    NDS_RETURN_IF_ERROR(CudaStatus(
        LaunchScaledBroadcast(in[2].as<const float>(), a.beta, y, map, bp.numel, StreamOf(ctx)),
        "Gemm C broadcast launch"));
  } else if (p.k == 0 || a.alpha == 0.0f) {
    NDS_RETURN_IF_ERROR(
        CudaStatus(cudaMemsetAsync(y, 0, out[0].nbytes(), StreamOf(ctx)), "Gemm cudaMemsetAsync"));
  }
  if (p.k > 0 && a.alpha != 0.0f) {
    const float beta = use_c ? 1.0f : 0.0f;
    NDS_RETURN_IF_ERROR(CublasStatus(
        cublasSgemm(handle, a.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                    a.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(p.n),
                    static_cast<int>(p.m), static_cast<int>(p.k), &a.alpha, in[1].as<const float>(),
                    static_cast<int>(a.trans_b ? p.k : p.n), in[0].as<const float>(),
                    static_cast<int>(a.trans_a ? p.m : p.k), &beta, y, static_cast<int>(p.n)),
        "Gemm cublasSgemm"));
  }
  return Epilogue(ctx, out[0], nullptr, a.epilogue);
}

absl::Status MatMul(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const GemmAttrs* fused = std::get_if<GemmAttrs>(&attrs);
  if (fused != nullptr) {
    // One 2-D product when B has no batch dims (A's batch folds into M).
    const MatMulPlan p = MakeMatMulPlan(in[0].shape, in[1].shape);
    if (p.fold_batch_into_m && p.batch * p.m > 0) {
      NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
      LtProduct lt{p.batch * p.m, p.n, p.k, false, false, in[0].as<const float>(),
                   in[1].as<const float>(), out[0].as<float>(), 1.0f,
                   fused->matmul_bias ? in[2].as<const float>() : nullptr,
                   fused->epilogue.activation};
      NDS_ASSIGN_OR_RETURN(const bool done, TryLtProduct(ctx, lt));
      if (done) return absl::OkStatus();
    }
  }
  NDS_RETURN_IF_ERROR(MatMulProduct(ctx, in, out));
  if (fused != nullptr) {
    return Epilogue(ctx, out[0], fused->matmul_bias ? in[2].as<const float>() : nullptr,
                    fused->epilogue);
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::gpu
