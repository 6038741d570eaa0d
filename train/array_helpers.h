#ifndef NDSERVE_TRAIN_ARRAY_HELPERS_H_
#define NDSERVE_TRAIN_ARRAY_HELPERS_H_

// Host-side helpers the autograd ops share: shapes, broadcasting of shapes, axes and FP32
// arrays. Nothing here touches an array's elements (train/compute.h runs the math on the
// step's device). FP32 only: training runs in FP32 (docs/design.md §10).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/nd_array.h"
#include "memory/nd_manager.h"

namespace ndserve::train {

using Dims = std::vector<std::int64_t>;

std::int64_t NumElements(absl::Span<const std::int64_t> shape);

// The raw FP32 pointer of an array (INVALID_ARGUMENT for another dtype, freed error).
absl::StatusOr<float*> F32(const NDArray& array);

// A new FP32 array in `scope`.
absl::StatusOr<NDArray> NewF32(NDManager& scope, absl::Span<const std::int64_t> shape);
absl::StatusOr<NDArray> ZerosF32(NDManager& scope, absl::Span<const std::int64_t> shape);

// NumPy broadcasting of two shapes; INVALID_ARGUMENT naming both when they do not.
absl::StatusOr<Dims> BroadcastShapes(absl::Span<const std::int64_t> a,
                                     absl::Span<const std::int64_t> b);

// Elements per row of an array read as a table along its first dim (an embedding's
// rows): all of them for a scalar or an empty first dim.
std::int64_t RowWidth(const NDArray& table);

// A possibly negative ONNX axis made non-negative; INVALID_ARGUMENT naming `op` when it
// is outside [-rank, rank).
absl::StatusOr<std::int64_t> NormAxis(std::int64_t axis, std::size_t rank, const char* op);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_ARRAY_HELPERS_H_
