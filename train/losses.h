#ifndef NDSERVE_TRAIN_LOSSES_H_
#define NDSERVE_TRAIN_LOSSES_H_

// Losses as fused ops with backward, each the mean over all elements (PyTorch's
// default reduction). Labels and targets need no gradient.

#include "absl/status/statusor.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train {

// logits [N, C], labels INT64 [N] (class ids in [0, C)).
absl::StatusOr<Variable> CrossEntropyLoss(NDManager& scope, const Variable& logits,
                                          const Variable& labels);
// logits and targets (0..1) of the same shape.
absl::StatusOr<Variable> BceWithLogitsLoss(NDManager& scope, const Variable& logits,
                                           const Variable& targets);
absl::StatusOr<Variable> MseLoss(NDManager& scope, const Variable& prediction,
                                 const Variable& target);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_LOSSES_H_
