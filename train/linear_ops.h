#ifndef NDSERVE_TRAIN_LINEAR_OPS_H_
#define NDSERVE_TRAIN_LINEAR_OPS_H_

// Matrix products with backward, through OpenBLAS.

#include "absl/status/statusor.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train {

// ONNX Gemm: alpha * op(A) op(B) + beta * C, A and B 2-D, C (optional: a null Variable)
// broadcast to [M, N].
struct GemmOptions {
  float alpha = 1.0f;
  float beta = 1.0f;
  bool trans_a = false;
  bool trans_b = false;
};
absl::StatusOr<Variable> Gemm(NDManager& scope, const Variable& a, const Variable& b,
                              const Variable& c, const GemmOptions& options = {});

// A [..., K] x B [K, N] -> [..., N] (leading dims of A flattened into rows).
absl::StatusOr<Variable> MatMul(NDManager& scope, const Variable& a, const Variable& b);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_LINEAR_OPS_H_
