#include "train/linear_ops.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/train_kernels.h"
#include "train/compute.h"
#include "train/array_helpers.h"

namespace ndserve::train {
namespace {

absl::Status ShapeError(const char* op, const Variable& a, const Variable& b) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": shapes [", absl::StrJoin(a.shape(), ","),
                                                 "] and [", absl::StrJoin(b.shape(), ","),
                                                 "] do not multiply"));
}

// The input gradients of Y = alpha op(A) op(B) (+ C), shared by Gemm and MatMul: with A and
// B held as stored, each gradient is one more GEMM whose transposes follow op(), through
// the training math table (kernels/train_kernels.h; cuBLAS on CUDA, docs/design.md §10.2).
absl::Status AccumulateProductGrads(BackwardContext& ctx, const NDArray& g, bool trans_a,
                                    bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                                    float alpha) {
  const NDArray& a = ctx.node().inputs[0].value();
  const NDArray& b = ctx.node().inputs[1].value();
  NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&g, &a, &b}));
  const kernels::KernelContext& kctx = CurrentContext();
  NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
  NDS_ASSIGN_OR_RETURN(const float* pa, F32(a));
  NDS_ASSIGN_OR_RETURN(const float* pb, F32(b));
  if (ctx.NeedsGrad(0)) {
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    NDS_ASSIGN_OR_RETURN(float* da, F32(s.array));
    const float beta = s.accumulate ? 1.0f : 0.0f;
    if (!trans_a) {  // dA[m,k] = dY[m,n] op(B)^T
      NDS_RETURN_IF_ERROR(math->gemm(kctx, false, !trans_b, m, k, n, alpha, pg, pb, beta, da));
    } else {  // dA[k,m] = op(B)[k,n] dY^T
      NDS_RETURN_IF_ERROR(math->gemm(kctx, trans_b, true, k, m, n, alpha, pb, pg, beta, da));
    }
  }
  if (ctx.NeedsGrad(1)) {
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(1));
    NDS_ASSIGN_OR_RETURN(float* db, F32(s.array));
    const float beta = s.accumulate ? 1.0f : 0.0f;
    if (!trans_b) {  // dB[k,n] = op(A)^T dY
      NDS_RETURN_IF_ERROR(math->gemm(kctx, !trans_a, false, k, n, m, alpha, pa, pg, beta, db));
    } else {  // dB[n,k] = dY^T op(A)
      NDS_RETURN_IF_ERROR(math->gemm(kctx, true, trans_a, n, k, m, alpha, pg, pa, beta, db));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Variable> Gemm(NDManager& scope, const Variable& a, const Variable& b,
                              const Variable& c, const GemmOptions& o) {
  if (a.shape().size() != 2 || b.shape().size() != 2) return ShapeError("Gemm", a, b);
  const std::int64_t m = o.trans_a ? a.shape()[1] : a.shape()[0];
  const std::int64_t k = o.trans_a ? a.shape()[0] : a.shape()[1];
  const std::int64_t kb = o.trans_b ? b.shape()[1] : b.shape()[0];
  const std::int64_t n = o.trans_b ? b.shape()[0] : b.shape()[1];
  if (k != kb) return ShapeError("Gemm", a, b);
  const Dims out_shape{m, n};
  const bool has_c = !c.is_null();
  if (has_c) {
    NDS_ASSIGN_OR_RETURN(Dims bc, BroadcastShapes(c.shape(), out_shape));
    if (bc != out_shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Gemm: C [", absl::StrJoin(c.shape(), ","), "] does not broadcast to [", m, ",", n, "]"));
    }
  }
  // The forward Gemm kernel (kernels/dispatch.h) broadcasts C itself.
  kernels::GemmAttrs attrs;
  attrs.alpha = o.alpha;
  attrs.beta = o.beta;
  attrs.trans_a = o.trans_a;
  attrs.trans_b = o.trans_b;
  std::vector<kernels::TensorView> in{View(a.value()), View(b.value())};
  if (has_c) in.push_back(View(c.value()));
  NDS_ASSIGN_OR_RETURN(NDArray out, RunOp(scope, kernels::OpKind::kGemm, in, attrs));

  std::vector<Variable> inputs{a, b};
  if (has_c) inputs.push_back(c);
  auto creator = Record("Gemm", std::move(inputs),
                        [o, m, n, k](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    NDS_RETURN_IF_ERROR(AccumulateProductGrads(ctx, g, o.trans_a, o.trans_b, m, n, k, o.alpha));
    if (ctx.node().inputs.size() > 2 && ctx.NeedsGrad(2)) {
      NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(2));
      const NDArray& c = ctx.node().inputs[2].value();
      NDS_RETURN_IF_ERROR(AddReduced(ctx.scope(), o.beta, g, c.shape(), s.array, s.accumulate));
    }
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

absl::StatusOr<Variable> MatMul(NDManager& scope, const Variable& a, const Variable& b) {
  if (a.shape().empty() || b.shape().size() != 2 || a.shape().back() != b.shape()[0]) {
    return ShapeError("MatMul", a, b);
  }
  const std::int64_t k = b.shape()[0];
  const std::int64_t n = b.shape()[1];
  const std::int64_t m = a.value().num_elements() / std::max<std::int64_t>(k, 1);
  NDS_ASSIGN_OR_RETURN(NDArray out, RunOp(scope, kernels::OpKind::kMatMul,
                                          {View(a.value()), View(b.value())}, kernels::GemmAttrs{}));
  auto creator = Record("MatMul", {a, b},
                        [m, n, k](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    return AccumulateProductGrads(ctx, g, false, false, m, n, k, 1.0f);
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace ndserve::train
