#include "train/losses.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/train_kernels.h"
#include "train/compute.h"
#include "train/array_helpers.h"

namespace ndserve::train {
namespace {

absl::Status SameShape(const char* op, const Variable& a, const Variable& b) {
  if (std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(op, ": prediction [", absl::StrJoin(a.shape(), ","),
                                                 "] and target [", absl::StrJoin(b.shape(), ","),
                                                 "] differ"));
}

// Input 0's gradient: the scalar output gradient times `per_element` (d loss / d input,
// computed by the forward into the batch scope). The scalar stays on the step's device
// (a broadcasting Mul), so nothing waits for it.
absl::Status GiveScaled(BackwardContext& ctx, const NDArray& g, const NDArray& per_element) {
  NDS_ASSIGN_OR_RETURN(NDArray full, RunOp(ctx.scope(), kernels::OpKind::kMul,
                                           {View(per_element), View(g, {})}));
  return ctx.Add(0, full);
}

// The loss (a scalar array in `scope`) and the per-element gradient from the table.
absl::StatusOr<NDArray> ComputeLoss(NDManager& scope, kernels::TrainLossKind kind,
                                    const NDArray& prediction, const NDArray& labels,
                                    std::int64_t rows, std::int64_t cols, const NDArray& grad) {
  NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&prediction, &labels, &grad}));
  NDS_ASSIGN_OR_RETURN(NDArray out, NewF32(scope, Dims{}));
  NDS_ASSIGN_OR_RETURN(const float* px, F32(prediction));
  NDS_ASSIGN_OR_RETURN(const void* pl, labels.Data());
  NDS_ASSIGN_OR_RETURN(float* d, F32(grad));
  NDS_ASSIGN_OR_RETURN(float* loss, F32(out));
  NDS_RETURN_IF_ERROR(math->loss(CurrentContext(), kind, px, pl, rows, cols, loss, d));
  return out;
}

}  // namespace

absl::StatusOr<Variable> CrossEntropyLoss(NDManager& scope, const Variable& logits,
                                          const Variable& labels) {
  if (logits.shape().size() != 2 || labels.shape().size() != 1 ||
      labels.shape()[0] != logits.shape()[0] || labels.value().dtype() != DType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CrossEntropyLoss: wants logits [N,C] and INT64 labels [N], got [",
        absl::StrJoin(logits.shape(), ","), "] and ", labels.value().DebugString()));
  }
  const std::int64_t n = logits.shape()[0], c = logits.shape()[1];
  // The loss and d loss / d logits = (softmax - onehot) / N, kept for the backward, come
  // from the training math table (kernels/train_kernels.h), which refuses a label outside
  // [0, C).
  NDS_ASSIGN_OR_RETURN(NDArray grad, NewF32(scope, logits.shape()));
  NDS_ASSIGN_OR_RETURN(NDArray out, ComputeLoss(scope, kernels::TrainLossKind::kCrossEntropy,
                                                logits.value(), labels.value(), n, c, grad));
  auto creator = Record("CrossEntropyLoss", {logits, labels},
                        [grad](BackwardContext& ctx, const NDArray& g) {
                          return GiveScaled(ctx, g, grad);
                        });
  return Variable::FromOp(std::move(out), std::move(creator));
}

namespace {

// A mean over elements of loss(x, t) whose gradient is d loss / d x per element: the shape
// check, the forward, the kept gradient and the recorded backward are the same for every
// such loss; the table computes the loss and the per-element gradient.
absl::StatusOr<Variable> MeanElementwiseLoss(const char* name, kernels::TrainLossKind kind,
                                             NDManager& scope, const Variable& prediction,
                                             const Variable& target) {
  NDS_RETURN_IF_ERROR(SameShape(name, prediction, target));
  if (target.value().dtype() != DType::kFp32) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the target is ", target.value().DebugString(), ", not FP32"));
  }
  const std::int64_t n = prediction.value().num_elements();
  NDS_ASSIGN_OR_RETURN(NDArray grad, NewF32(scope, prediction.shape()));
  NDS_ASSIGN_OR_RETURN(NDArray out,
                       ComputeLoss(scope, kind, prediction.value(), target.value(), n, 1, grad));
  auto creator = Record(name, {prediction, target},
                        [grad](BackwardContext& ctx, const NDArray& g) {
                          return GiveScaled(ctx, g, grad);
                        });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace

absl::StatusOr<Variable> BceWithLogitsLoss(NDManager& scope, const Variable& logits,
                                           const Variable& targets) {
  // max(x, 0) - x t + log(1 + e^-|x|) per element: no overflow for large |x|.
  return MeanElementwiseLoss("BceWithLogitsLoss", kernels::TrainLossKind::kBceWithLogits, scope,
                             logits, targets);
}

absl::StatusOr<Variable> MseLoss(NDManager& scope, const Variable& prediction,
                                 const Variable& target) {
  return MeanElementwiseLoss("MseLoss", kernels::TrainLossKind::kMse, scope, prediction, target);
}

}  // namespace ndserve::train
