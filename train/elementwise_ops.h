#ifndef NDSERVE_TRAIN_ELEMENTWISE_OPS_H_
#define NDSERVE_TRAIN_ELEMENTWISE_OPS_H_

// Elementwise ops with backward: NumPy broadcasting for the binary ones (an input's
// gradient is summed over the dims it was broadcast along). Outputs and gradient
// temporaries are made in `scope` (the step's batch manager). FP32.

#include "absl/status/statusor.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train {

absl::StatusOr<Variable> Add(NDManager& scope, const Variable& a, const Variable& b);
absl::StatusOr<Variable> Sub(NDManager& scope, const Variable& a, const Variable& b);
absl::StatusOr<Variable> Mul(NDManager& scope, const Variable& a, const Variable& b);
absl::StatusOr<Variable> Div(NDManager& scope, const Variable& a, const Variable& b);
absl::StatusOr<Variable> Relu(NDManager& scope, const Variable& x);
absl::StatusOr<Variable> Sigmoid(NDManager& scope, const Variable& x);
absl::StatusOr<Variable> Tanh(NDManager& scope, const Variable& x);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_ELEMENTWISE_OPS_H_
