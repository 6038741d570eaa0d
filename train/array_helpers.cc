#include "train/array_helpers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ndserve::train {

std::int64_t NumElements(absl::Span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<float*> F32(const NDArray& array) { return array.DataAs<float>(); }

absl::StatusOr<NDArray> NewF32(NDManager& scope, absl::Span<const std::int64_t> shape) {
  return scope.Create(shape, DType::kFp32);
}

absl::StatusOr<NDArray> ZerosF32(NDManager& scope, absl::Span<const std::int64_t> shape) {
  return scope.Zeros(shape, DType::kFp32);
}

absl::StatusOr<Dims> BroadcastShapes(absl::Span<const std::int64_t> a,
                                     absl::Span<const std::int64_t> b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat("shapes [", absl::StrJoin(a, ","),
                                                     "] and [", absl::StrJoin(b, ","),
                                                     "] do not broadcast"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::int64_t RowWidth(const NDArray& table) {
  if (table.rank() == 0 || table.shape()[0] == 0) return table.num_elements();
  return table.num_elements() / table.shape()[0];
}

absl::StatusOr<std::int64_t> NormAxis(std::int64_t axis, std::size_t rank, const char* op) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": axis ", axis, " out of range for rank ", r));
  }
  return axis < 0 ? axis + r : axis;
}

}  // namespace ndserve::train
