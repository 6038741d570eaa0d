#include "train/reduce_ops.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/train_kernels.h"
#include "train/compute.h"
#include "train/array_helpers.h"

namespace ndserve::train {
namespace {

using kernels::OpKind;

absl::StatusOr<Variable> Reduce(NDManager& scope, const Variable& x,
                                absl::Span<const std::int64_t> axes, bool keepdims, bool mean) {
  const char* op = mean ? "ReduceMean" : "ReduceSum";
  const std::size_t rank = x.shape().size();
  Dims kept(x.shape().begin(), x.shape().end());  // the keepdims shape
  if (axes.empty()) {
    std::fill(kept.begin(), kept.end(), 1);
  } else {
    for (std::int64_t a : axes) {
      NDS_ASSIGN_OR_RETURN(std::int64_t axis, NormAxis(a, rank, op));
      kept[axis] = 1;
    }
  }
  const std::int64_t n_in = x.value().num_elements();
  const std::int64_t n_out = NumElements(kept);
  const float scale =
      mean ? (n_out > 0 && n_in > 0 ? static_cast<float>(n_out) / static_cast<float>(n_in) : 0.0f)
           : 1.0f;
  kernels::ReduceAttrs attrs;
  attrs.axes.assign(axes.begin(), axes.end());
  attrs.keepdims = keepdims;
  NDS_ASSIGN_OR_RETURN(NDArray out, RunOp(scope, mean ? OpKind::kReduceMean : OpKind::kReduceSum,
                                          {View(x.value())}, attrs));
  Dims in_shape(x.shape().begin(), x.shape().end());
  // The gradient is the output's, read under the keepdims shape and expanded back to
  // the input's, times 1 (sum) or the reduced fraction (mean).
  auto creator = Record(op, {x}, [kept, in_shape, scale](BackwardContext& ctx,
                                                         const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    kernels::ExpandAttrs expand;
    expand.shape = in_shape;
    NDS_ASSIGN_OR_RETURN(NDArray full,
                         RunOp(ctx.scope(), OpKind::kExpand, {View(g, kept)}, expand));
    return Axpy(scale, full, s.array, s.accumulate);
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

absl::StatusOr<Variable> SoftmaxImpl(NDManager& scope, const Variable& x, std::int64_t axis,
                                     bool log) {
  const char* op = log ? "LogSoftmax" : "Softmax";
  NDS_ASSIGN_OR_RETURN(axis, NormAxis(axis, x.shape().size(), op));
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (std::size_t d = axis + 1; d < x.shape().size(); ++d) inner *= x.shape()[d];
  const std::int64_t dim = x.shape()[axis];
  kernels::SoftmaxAttrs attrs;
  attrs.axis = axis;
  NDS_ASSIGN_OR_RETURN(NDArray out, RunOp(scope, log ? OpKind::kLogSoftmax : OpKind::kSoftmax,
                                          {View(x.value())}, attrs));
  auto creator = Record(op, {x}, [out, outer, inner, dim, axis, log](
                                     BackwardContext& ctx, const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    if (inner == 1) {
      // Over the last axis: one table call (kernels/train_kernels.h).
      NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&g, &out}));
      NDS_ASSIGN_OR_RETURN(float* dst, F32(s.array));
      NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
      NDS_ASSIGN_OR_RETURN(const float* py, F32(out));
      return math->softmax_backward(CurrentContext(), log, py, pg, dst, outer, dim, s.accumulate);
    }
    // Over an inner axis, from forward kernels: softmax y (g - sum(g y)), log-softmax
    // g - exp(y) sum(g), the sums over the axis kept for broadcasting.
    NDManager& scope = ctx.scope();
    kernels::ReduceAttrs sum;
    sum.axes = {axis};
    NDArray full;
    if (log) {
      NDS_ASSIGN_OR_RETURN(NDArray total, RunOp(scope, OpKind::kReduceSum, {View(g)}, sum));
      NDS_ASSIGN_OR_RETURN(NDArray e, RunOp(scope, OpKind::kExp, {View(out)}));
      NDS_ASSIGN_OR_RETURN(NDArray part, RunOp(scope, OpKind::kMul, {View(e), View(total)}));
      NDS_ASSIGN_OR_RETURN(full, RunOp(scope, OpKind::kSub, {View(g), View(part)}));
    } else {
      NDS_ASSIGN_OR_RETURN(NDArray gy, RunOp(scope, OpKind::kMul, {View(g), View(out)}));
      NDS_ASSIGN_OR_RETURN(NDArray dot, RunOp(scope, OpKind::kReduceSum, {View(gy)}, sum));
      NDS_ASSIGN_OR_RETURN(NDArray diff, RunOp(scope, OpKind::kSub, {View(g), View(dot)}));
      NDS_ASSIGN_OR_RETURN(full, RunOp(scope, OpKind::kMul, {View(out), View(diff)}));
    }
    return Axpy(1.0f, full, s.array, s.accumulate);
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace

absl::StatusOr<Variable> ReduceSum(NDManager& scope, const Variable& x,
                                   absl::Span<const std::int64_t> axes, bool keepdims) {
  return Reduce(scope, x, axes, keepdims, false);
}
absl::StatusOr<Variable> ReduceMean(NDManager& scope, const Variable& x,
                                    absl::Span<const std::int64_t> axes, bool keepdims) {
  return Reduce(scope, x, axes, keepdims, true);
}
absl::StatusOr<Variable> Softmax(NDManager& scope, const Variable& x, std::int64_t axis) {
  return SoftmaxImpl(scope, x, axis, false);
}
absl::StatusOr<Variable> LogSoftmax(NDManager& scope, const Variable& x, std::int64_t axis) {
  return SoftmaxImpl(scope, x, axis, true);
}

absl::StatusOr<Variable> LayerNorm(NDManager& scope, const Variable& x, const Variable& scale,
                                   const Variable& bias, std::int64_t axis, float epsilon) {
  NDS_ASSIGN_OR_RETURN(axis, NormAxis(axis, x.shape().size(), "LayerNormalization"));
  std::int64_t rows = 1, cols = 1;
  for (std::int64_t d = 0; d < axis; ++d) rows *= x.shape()[d];
  for (std::size_t d = axis; d < x.shape().size(); ++d) cols *= x.shape()[d];
  const bool has_bias = !bias.is_null();
  if (scale.value().num_elements() != cols || (has_bias && bias.value().num_elements() != cols)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LayerNormalization: scale and bias must hold ", cols, " elements"));
  }
  // The forward kernel also gives each row's mean and 1/sigma ([rows] in the
  // statistics' keepdims shape); the backward wants xhat = (x - mean) / sigma as well.
  NDS_ASSIGN_OR_RETURN(NDArray out, NewF32(scope, x.shape()));
  Dims stats_shape(x.shape().begin(), x.shape().end());
  for (std::size_t d = axis; d < stats_shape.size(); ++d) stats_shape[d] = 1;
  NDS_ASSIGN_OR_RETURN(NDArray mean, NewF32(scope, stats_shape));
  NDS_ASSIGN_OR_RETURN(NDArray rstd, NewF32(scope, stats_shape));
  // The kernel wants scale and bias in X.shape[axis:] (leading 1s allowed).
  const Dims normalized(x.shape().begin() + axis, x.shape().end());
  std::vector<kernels::TensorView> in{View(x.value()), View(scale.value(), normalized)};
  if (has_bias) in.push_back(View(bias.value(), normalized));
  kernels::LayerNormAttrs attrs;
  attrs.axis = axis;
  attrs.epsilon = epsilon;
  NDS_RETURN_IF_ERROR(RunOp(scope, OpKind::kLayerNormalization, in,
                            {View(out), View(mean), View(rstd)}, attrs));
  NDS_ASSIGN_OR_RETURN(NDArray centered,
                       RunOp(scope, OpKind::kSub, {View(x.value()), View(mean)}));
  NDS_ASSIGN_OR_RETURN(NDArray xhat, RunOp(scope, OpKind::kMul, {View(centered), View(rstd)}));
  std::vector<Variable> inputs{x, scale};
  if (has_bias) inputs.push_back(bias);
  auto creator = Record("LayerNormalization", std::move(inputs),
                        [xhat, rstd, rows, cols](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    const NDArray& w = ctx.node().inputs[1].value();
    // Each wanted gradient is one table call (kernels/train_kernels.h), so each gets its
    // own slot's accumulate flag.
    NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&g, &xhat, &w}));
    NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
    NDS_ASSIGN_OR_RETURN(const float* ph, F32(xhat));
    NDS_ASSIGN_OR_RETURN(const float* pr, F32(rstd));
    NDS_ASSIGN_OR_RETURN(const float* pw, F32(w));
    for (int i = 0; i < static_cast<int>(ctx.node().inputs.size()); ++i) {
      if (!ctx.NeedsGrad(i)) continue;
      NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(i));
      NDS_ASSIGN_OR_RETURN(float* d, F32(s.array));
      NDS_RETURN_IF_ERROR(math->layer_norm_backward(CurrentContext(), ph, pw, pr, pg, rows, cols,
                                                    i == 0 ? d : nullptr, i == 1 ? d : nullptr,
                                                    i == 2 ? d : nullptr, s.accumulate));
    }
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace ndserve::train
