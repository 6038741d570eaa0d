#include "train/losses.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/train_kernels.h"
#include "train/cpu_math.h"

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

absl::StatusOr<NDArray> Scalar(NDManager& scope, float value) {
  NDS_ASSIGN_OR_RETURN(NDArray out, NewF32(scope, Dims{}));
  NDS_ASSIGN_OR_RETURN(float* p, F32(out));
  *p = value;
  return out;
}

// Input 0's gradient: the scalar output gradient times `per_element` (d loss / d input,
// computed by the forward into the batch scope).
absl::Status GiveScaled(BackwardContext& ctx, const NDArray& g, const NDArray& per_element) {
  NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
  NDS_ASSIGN_OR_RETURN(const float* d, F32(per_element));
  NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
  NDS_ASSIGN_OR_RETURN(float* dst, F32(s.array));
  const float factor = *pg;
  for (std::int64_t e = 0; e < per_element.num_elements(); ++e) {
    dst[e] = s.accumulate ? dst[e] + factor * d[e] : factor * d[e];
  }
  return absl::OkStatus();
}

// The losses' math is the table's on the prediction's device: the CPU's until train/
// runs on CUDA (docs/design.md §10.2).
absl::StatusOr<const kernels::TrainKernels*> MathFor(const NDArray& prediction) {
  if (prediction.device().is_cuda()) {
    return absl::UnimplementedError("losses on CUDA predictions are not wired yet");
  }
  return kernels::LookupTrainKernels(DeviceKind::kCpu);
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
  NDS_ASSIGN_OR_RETURN(const float* px, F32(logits.value()));
  NDS_ASSIGN_OR_RETURN(const std::int64_t* pl, labels.value().DataAs<std::int64_t>());
  // d loss / d logits = (softmax - onehot) / N, kept for the backward.
  NDS_ASSIGN_OR_RETURN(NDArray grad, NewF32(scope, logits.shape()));
  NDS_ASSIGN_OR_RETURN(float* d, F32(grad));
  // The loss and d loss / d logits = (softmax - onehot) / N come from the training math
  // table (kernels/train_kernels.h), which refuses a label outside [0, C).
  NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor(logits.value()));
  float loss = 0.0f;
  NDS_RETURN_IF_ERROR(math->loss(kernels::KernelContext::Cpu(),
                                 kernels::TrainLossKind::kCrossEntropy, px, pl, n, c, &loss, d));
  NDS_ASSIGN_OR_RETURN(NDArray out, Scalar(scope, loss));
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
  const std::int64_t n = prediction.value().num_elements();
  NDS_ASSIGN_OR_RETURN(const float* px, F32(prediction.value()));
  NDS_ASSIGN_OR_RETURN(const float* pt, F32(target.value()));
  NDS_ASSIGN_OR_RETURN(NDArray grad, NewF32(scope, prediction.shape()));
  NDS_ASSIGN_OR_RETURN(float* d, F32(grad));
  NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor(prediction.value()));
  float loss = 0.0f;
  NDS_RETURN_IF_ERROR(math->loss(kernels::KernelContext::Cpu(), kind, px, pt, n, 1, &loss, d));
  NDS_ASSIGN_OR_RETURN(NDArray out, Scalar(scope, loss));
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
