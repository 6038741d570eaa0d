#ifndef NDSERVE_KERNELS_EINSUM_PLAN_H_
#define NDSERVE_KERNELS_EINSUM_PLAN_H_

// Einsum lowered to what the kernels of both devices run: at most one transpose per
// operand, one batched GEMM, and one transpose of the result.
//
// Two operands: every letter is a batch letter (in A, B and the output), an M letter (A
// and output), an N letter (B and output) or a K letter (A and B, summed). A is read as
// [batch, M, K] (or [batch, K, M], transposed in the GEMM), B as [batch, K, N] (or
// [batch, N, K]); whichever of the two orders the operand already has is used without a
// copy. The GEMM writes [batch, M, N] in the output's letter order when it can, else into
// working space that one transpose turns into the output. One operand: a transpose.
// Letters summed within one operand only, and letters repeated in one operand (diagonals),
// have no lowering; the rules refuse them. A plain value.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/op_attrs.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels {

struct EinsumOperand {
  Shape perm;               // operand dims in GEMM order; empty when no copy is needed
  bool transposed = false;  // A as [batch, K, M] / B as [batch, N, K]
};

struct EinsumPlan {
  int num_inputs = 2;
  EinsumOperand a, b;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  Shape mid_shape;  // [batch letters..., M letters..., N letters...] dims
  Shape out_perm;   // mid dims -> output order; empty when the GEMM writes the output
  Shape out_shape;
};

// The plan for `attrs` over operands of these shapes, or INVALID_ARGUMENT (ranks that do
// not match the equation, a letter with two sizes) / UNIMPLEMENTED (forms without a
// lowering), naming the equation.
absl::StatusOr<EinsumPlan> MakeEinsumPlan(const EinsumAttrs& attrs,
                                          absl::Span<const TensorDesc> inputs);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_EINSUM_PLAN_H_
