// LSTM, GRU and RNN on CUDA, the plan of kernels/cpu/rnn.cc: per direction one cuBLAS
// SGEMM projects every time step's input, then per step one SGEMM of the state with R^T
// and one launch of the gate math (two of each for GRU with linear_before_reset 0).
// Einsum (at the end) follows kernels/cpu/rnn_einsum.cc. Everything is queued on
// ctx.cuda_stream; working space comes from ctx.scratch, whose blocks outlive the queued
// work (kernel_context.h).
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/cublas_util.h"
#include "kernels/cuda/rnn_launchers.h"
#include "kernels/einsum_plan.h"
#include "kernels/plans.h"
#include "kernels/rnn_plan.h"

namespace ndserve::kernels::gpu {
namespace {

// Row-major C[m, n] (row stride ldc) = A[m, k] * B[n, k]^T. cuBLAS is column-major, so it
// computes C^T = B A^T with B read transposed.
absl::Status GemmNT(absl::string_view op, cublasHandle_t handle, int64_t m, int64_t n, int64_t k,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc) {
  if (m == 0 || n == 0) return absl::OkStatus();
  const float one = 1.0f, zero = 0.0f;
  return CublasStatus(
      cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                  static_cast<int>(k), &one, b, static_cast<int>(std::max<int64_t>(ldb, 1)), a,
                  static_cast<int>(std::max<int64_t>(lda, 1)), &zero, c, static_cast<int>(ldc)),
      op);
}

// Copies `batch` vectors of `hidden` floats between a dense [batch, hidden] state and a
// state tensor's slice of one direction (rows `pitch` floats apart).
absl::Status CopyRows(absl::string_view op, float* dst, int64_t dst_pitch, const float* src,
                      int64_t src_pitch, int64_t hidden, int64_t batch, cudaStream_t stream) {
  return CudaStatus(
      cudaMemcpy2DAsync(dst, dst_pitch * sizeof(float), src, src_pitch * sizeof(float),
                        hidden * sizeof(float), batch, cudaMemcpyDeviceToDevice, stream),
      absl::StrCat(op, " state copy"));
}

absl::Status RunRecurrent(absl::string_view op, RnnCell cell, const KernelContext& ctx,
                          absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                          const OpAttrs& attrs) {
  const RnnPlan p = MakeRnnPlan(cell, std::get<RecurrentAttrs>(attrs), in, out);
  const int64_t H = p.hidden, gh = p.gates * H;
  if (p.seq * p.batch > INT_MAX || gh > INT_MAX || p.input > INT_MAX) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: sizes seq*batch %d, gates*hidden %d, input %d exceed the cuBLAS int range", op,
        p.seq * p.batch, gh, p.input));
  }
  if (ctx.cublas_handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, ": the CUDA context has no cuBLAS handle"));
  }
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(op, ": the kernel context has no scratch"));
  }
  cublasHandle_t handle = static_cast<cublasHandle_t>(ctx.cublas_handle);
  const cudaStream_t stream = StreamOf(ctx);
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  if (p.lens != nullptr && out[0].nbytes() > 0) {
    // Steps past an entry's length stay zero in Y. Lengths outside [0, seq] are clamped
    // on the device (the CPU kernel reports them; here that would need a sync).
    NDS_RETURN_IF_ERROR(
        CudaStatus(cudaMemsetAsync(p.y, 0, out[0].nbytes(), stream), "Y cudaMemsetAsync"));
  }
  if (p.batch == 0) return absl::OkStatus();

  const int64_t round = 64;  // floats: keeps every part 256-byte aligned
  auto rounded = [&](int64_t n) { return (n + round - 1) / round * round; };
  const int64_t xw_n = rounded(p.seq * p.batch * gh), gates_n = rounded(p.batch * gh),
                state_n = rounded(p.batch * H);
  NDS_ASSIGN_OR_RETURN(void* block,
                       ctx.scratch->Allocate((xw_n + gates_n + 3 * state_n) * sizeof(float)));
  float* xw = static_cast<float*>(block);
  float* gates = xw + xw_n;
  float* h = gates + gates_n;
  float* c = h + state_n;
  float* rh = c + state_n;
  const bool gru = cell == RnnCell::kGru;
  const bool lbr = gru && p.linear_before_reset;
  const int64_t state_pitch = p.batch_major ? p.dirs * H : H;

  for (int64_t dir = 0; dir < p.dirs; ++dir) {
    const float* w = p.w + dir * gh * p.input;
    const float* r = p.r + dir * gh * H;
    const float* wb = p.b == nullptr ? nullptr : p.b + dir * 2 * gh;
    const float* rb = wb == nullptr ? nullptr : wb + gh;
    const int64_t rows = p.seq * p.batch;
    NDS_RETURN_IF_ERROR(GemmNT(op, handle, rows, gh, p.input, p.x, p.input, w, p.input, xw, gh));
    if (wb != nullptr) {
      NDS_RETURN_IF_ERROR(
          CudaStatus(LaunchRnnAddBias(xw, gh, wb, rows, gh, stream), "bias launch"));
      // GRU's Rbh with linear_before_reset sits inside r (.) (H Rh^T + Rbh): not folded.
      NDS_RETURN_IF_ERROR(
          CudaStatus(LaunchRnnAddBias(xw, gh, rb, rows, lbr ? 2 * H : gh, stream), "bias launch"));
    }
    for (auto [init, state] : {std::pair{p.initial_h, h}, std::pair{p.initial_c, c}}) {
      if (state == c && cell != RnnCell::kLstm) continue;
      if (init == nullptr) {
        NDS_RETURN_IF_ERROR(CudaStatus(
            cudaMemsetAsync(state, 0, p.batch * H * sizeof(float), stream), "state memset"));
      } else {
        NDS_RETURN_IF_ERROR(
            CopyRows(op, state, H, init + p.StateOffset(dir, 0), state_pitch, H, p.batch, stream));
      }
    }
    RnnStepArgs args;
    args.cell = cell == RnnCell::kLstm ? RnnCellCode::kLstm
                : gru                  ? RnnCellCode::kGru
                                       : RnnCellCode::kRnn;
    args.xw = xw;
    args.gates = gates;
    args.h = h;
    args.c = c;
    args.rh = rh;
    args.peep = p.p == nullptr ? nullptr : p.p + dir * 3 * H;
    args.rbh = lbr && rb != nullptr ? rb + 2 * H : nullptr;
    args.y = p.y;
    args.lens = p.lens;
    args.seq = p.seq;
    args.batch = p.batch;
    args.hidden = H;
    args.dirs = p.dirs;
    args.dir = dir;
    args.batch_major = p.batch_major;
    args.reverse = p.Reverse(dir);
    args.linear_before_reset = lbr;
    args.clip = p.clip;
    for (int64_t s = 0; s < p.seq; ++s) {
      args.step = s;
      NDS_RETURN_IF_ERROR(
          GemmNT(op, handle, p.batch, gru && !lbr ? 2 * H : gh, H, h, H, r, H, gates, gh));
      if (gru && !lbr) {
        NDS_RETURN_IF_ERROR(CudaStatus(LaunchGruResetStep(args, stream), "GRU reset launch"));
        NDS_RETURN_IF_ERROR(
            GemmNT(op, handle, p.batch, H, H, rh, H, r + 2 * H * H, H, gates + 2 * H, gh));
      }
      NDS_RETURN_IF_ERROR(CudaStatus(LaunchRnnStep(args, stream), "step launch"));
    }
    if (p.y_h != nullptr) {
      NDS_RETURN_IF_ERROR(
          CopyRows(op, p.y_h + p.StateOffset(dir, 0), state_pitch, h, H, H, p.batch, stream));
    }
    if (p.y_c != nullptr) {
      NDS_RETURN_IF_ERROR(
          CopyRows(op, p.y_c + p.StateOffset(dir, 0), state_pitch, c, H, H, p.batch, stream));
    }
  }
  return absl::OkStatus();
}

// y = x transposed by perm (4-byte elements).
absl::Status TransposeFloats(const KernelContext& ctx, const float* x, ShapeSpan shape,
                             ShapeSpan perm, float* y) {
  const TransposePlan p = MakeTransposePlan(shape, perm);
  NDS_ASSIGN_OR_RETURN(IndexMap map, MakeIndexMap("Einsum", p.out_dims, p.in_strides));
  return CudaStatus(LaunchTranspose(x, y, 4, map, p.numel, StreamOf(ctx)), "Einsum transpose");
}

absl::StatusOr<float*> EinsumScratch(const KernelContext& ctx, int64_t n) {
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError("Einsum: the kernel context has no scratch");
  }
  NDS_ASSIGN_OR_RETURN(void* p, ctx.scratch->Allocate(std::max<int64_t>(n, 1) * sizeof(float)));
  return static_cast<float*>(p);
}

absl::StatusOr<const float*> Arrange(const KernelContext& ctx, const TensorView& t,
                                     const EinsumOperand& op) {
  if (op.perm.empty()) return t.as<const float>();
  NDS_ASSIGN_OR_RETURN(float* copy, EinsumScratch(ctx, t.numel()));
  NDS_RETURN_IF_ERROR(TransposeFloats(ctx, t.as<const float>(), t.shape, op.perm, copy));
  return copy;
}

}  // namespace

// Einsum as einsum_plan.h lowers it, with one strided-batched SGEMM (column-major: the
// operands swap, as in gemm.cc).
absl::Status Einsum(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  std::vector<TensorDesc> descs;
  for (const TensorView& t : in) descs.push_back(t.desc());
  NDS_ASSIGN_OR_RETURN(const EinsumPlan p, MakeEinsumPlan(std::get<EinsumAttrs>(attrs), descs));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  float* y = out[0].as<float>();
  const cudaStream_t stream = StreamOf(ctx);
  if (out[0].numel() == 0) return absl::OkStatus();
  if (p.num_inputs == 1) {
    if (p.out_perm.empty()) {
      return CudaStatus(
          cudaMemcpyAsync(y, in[0].data, in[0].nbytes(), cudaMemcpyDeviceToDevice, stream),
          "Einsum copy");
    }
    return TransposeFloats(ctx, in[0].as<const float>(), in[0].shape, p.out_perm, y);
  }
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX || p.batch > INT_MAX) {
    return absl::UnimplementedError(absl::StrCat("Einsum: matrix dimensions ", p.m, "x", p.n, "x",
                                                 p.k, " exceed the cuBLAS int range"));
  }
  if (ctx.cublas_handle == nullptr) {
    return absl::FailedPreconditionError("Einsum: the CUDA context has no cuBLAS handle");
  }
  float* c = y;
  if (!p.out_perm.empty()) {
    NDS_ASSIGN_OR_RETURN(c, EinsumScratch(ctx, out[0].numel()));
  }
  if (p.k == 0) {
    NDS_RETURN_IF_ERROR(CudaStatus(
        cudaMemsetAsync(c, 0, p.batch * p.m * p.n * sizeof(float), stream), "Einsum memset"));
  } else {
    NDS_ASSIGN_OR_RETURN(const float* a, Arrange(ctx, in[0], p.a));
    NDS_ASSIGN_OR_RETURN(const float* b, Arrange(ctx, in[1], p.b));
    const float one = 1.0f, zero = 0.0f;
    NDS_RETURN_IF_ERROR(CublasStatus(
        cublasSgemmStridedBatched(static_cast<cublasHandle_t>(ctx.cublas_handle),
                                  p.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  p.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(p.n),
                                  static_cast<int>(p.m), static_cast<int>(p.k), &one, b,
                                  static_cast<int>(p.b.transposed ? p.k : p.n), p.k * p.n, a,
                                  static_cast<int>(p.a.transposed ? p.m : p.k), p.m * p.k, &zero, c,
                                  static_cast<int>(p.n), p.m * p.n, static_cast<int>(p.batch)),
        "Einsum"));
  }
  if (!p.out_perm.empty()) {
    NDS_RETURN_IF_ERROR(TransposeFloats(ctx, c, p.mid_shape, p.out_perm, y));
  }
  return absl::OkStatus();
}

absl::Status LSTM(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return RunRecurrent("LSTM", RnnCell::kLstm, ctx, in, out, attrs);
}

absl::Status GRU(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return RunRecurrent("GRU", RnnCell::kGru, ctx, in, out, attrs);
}

absl::Status RNN(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return RunRecurrent("RNN", RnnCell::kRnn, ctx, in, out, attrs);
}

}  // namespace ndserve::kernels::gpu
