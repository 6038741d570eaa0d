#ifndef NDSERVE_TRAIN_REDUCE_OPS_H_
#define NDSERVE_TRAIN_REDUCE_OPS_H_

// Reductions and normalizations with backward: ReduceSum/ReduceMean, Softmax and
// LogSoftmax along one axis, LayerNormalization.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train {

// Empty `axes` reduces every dim.
absl::StatusOr<Variable> ReduceSum(NDManager& scope, const Variable& x,
                                   absl::Span<const std::int64_t> axes, bool keepdims = true);
absl::StatusOr<Variable> ReduceMean(NDManager& scope, const Variable& x,
                                    absl::Span<const std::int64_t> axes, bool keepdims = true);
absl::StatusOr<Variable> Softmax(NDManager& scope, const Variable& x, std::int64_t axis = -1);
absl::StatusOr<Variable> LogSoftmax(NDManager& scope, const Variable& x, std::int64_t axis = -1);
// Normalizes over dims [axis, rank); scale and bias (bias may be null) hold
// x.shape[axis:] elements.
absl::StatusOr<Variable> LayerNorm(NDManager& scope, const Variable& x, const Variable& scale,
                                   const Variable& bias, std::int64_t axis = -1,
                                   float epsilon = 1e-5f);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_REDUCE_OPS_H_
