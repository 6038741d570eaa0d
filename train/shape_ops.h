#ifndef NDSERVE_TRAIN_SHAPE_OPS_H_
#define NDSERVE_TRAIN_SHAPE_OPS_H_

// Ops that move elements without arithmetic, with backward: Reshape/Flatten, Concat,
// Narrow (a slice along one axis), Gather (embedding lookups: the table's gradient is
// written row by row, only for the ids looked up).

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train {

// `shape` may hold one -1 (inferred); 0 copies the input's dim.
absl::StatusOr<Variable> Reshape(NDManager& scope, const Variable& x,
                                 absl::Span<const std::int64_t> shape);
// ONNX Flatten: [d0..d(axis-1)] x [d(axis)..] -> 2-D.
absl::StatusOr<Variable> Flatten(NDManager& scope, const Variable& x, std::int64_t axis = 1);
absl::StatusOr<Variable> Concat(NDManager& scope, absl::Span<const Variable> xs,
                                std::int64_t axis);
// Elements [start, start + length) of `axis`.
absl::StatusOr<Variable> Narrow(NDManager& scope, const Variable& x, std::int64_t axis,
                                std::int64_t start, std::int64_t length);
// ONNX Gather on any dtype; INT64 or INT32 `indices` (negative ones count from the end).
absl::StatusOr<Variable> Gather(NDManager& scope, const Variable& data, const Variable& indices,
                                std::int64_t axis = 0);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_SHAPE_OPS_H_
