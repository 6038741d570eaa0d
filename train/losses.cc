#include "train/losses.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
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
  double total = 0.0;
  for (std::int64_t r = 0; r < n; ++r) {
    if (pl[r] < 0 || pl[r] >= c) {
      return absl::InvalidArgumentError(absl::StrCat("CrossEntropyLoss: label ", pl[r],
                                                     " outside [0, ", c, ")"));
    }
    const float* x = px + r * c;
    const float mx = *std::max_element(x, x + c);
    float sum = 0.0f;
    for (std::int64_t j = 0; j < c; ++j) sum += std::exp(x[j] - mx);
    const float lse = mx + std::log(sum);
    total += lse - x[pl[r]];
    for (std::int64_t j = 0; j < c; ++j) {
      d[r * c + j] = (std::exp(x[j] - lse) - (j == pl[r] ? 1.0f : 0.0f)) / static_cast<float>(n);
    }
  }
  NDS_ASSIGN_OR_RETURN(NDArray out, Scalar(scope, static_cast<float>(total / static_cast<double>(n))));
  auto creator = Record("CrossEntropyLoss", {logits, labels},
                        [grad](BackwardContext& ctx, const NDArray& g) {
                          return GiveScaled(ctx, g, grad);
                        });
  return Variable::FromOp(std::move(out), std::move(creator));
}

namespace {

// A mean over elements of loss(x, t) whose gradient is d loss / d x per element: the shape
// check, the forward, the kept gradient and the recorded backward are the same for every
// such loss; `term` gives one element's (loss, gradient).
template <typename Term>
absl::StatusOr<Variable> MeanElementwiseLoss(const char* name, NDManager& scope,
                                             const Variable& prediction, const Variable& target,
                                             Term term) {
  NDS_RETURN_IF_ERROR(SameShape(name, prediction, target));
  const std::int64_t n = prediction.value().num_elements();
  NDS_ASSIGN_OR_RETURN(const float* px, F32(prediction.value()));
  NDS_ASSIGN_OR_RETURN(const float* pt, F32(target.value()));
  NDS_ASSIGN_OR_RETURN(NDArray grad, NewF32(scope, prediction.shape()));
  NDS_ASSIGN_OR_RETURN(float* d, F32(grad));
  double total = 0.0;
  for (std::int64_t e = 0; e < n; ++e) {
    const auto [loss, slope] = term(px[e], pt[e]);
    total += loss;
    d[e] = slope / static_cast<float>(n);
  }
  NDS_ASSIGN_OR_RETURN(NDArray out, Scalar(scope, static_cast<float>(total / static_cast<double>(n))));
  auto creator = Record(name, {prediction, target},
                        [grad](BackwardContext& ctx, const NDArray& g) {
                          return GiveScaled(ctx, g, grad);
                        });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace

absl::StatusOr<Variable> BceWithLogitsLoss(NDManager& scope, const Variable& logits,
                                           const Variable& targets) {
  return MeanElementwiseLoss("BceWithLogitsLoss", scope, logits, targets, [](float x, float t) {
    // max(x, 0) - x t + log(1 + e^-|x|): no overflow for large |x|.
    const double loss = std::max(x, 0.0f) - x * t + std::log1p(std::exp(-std::fabs(x)));
    return std::pair<double, float>(loss, 1.0f / (1.0f + std::exp(-x)) - t);
  });
}

absl::StatusOr<Variable> MseLoss(NDManager& scope, const Variable& prediction,
                                 const Variable& target) {
  return MeanElementwiseLoss("MseLoss", scope, prediction, target, [](float x, float t) {
    const float diff = x - t;
    return std::pair<double, float>(static_cast<double>(diff) * diff, 2.0f * diff);
  });
}

}  // namespace ndserve::train
