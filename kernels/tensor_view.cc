#include "kernels/tensor_view.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ndserve::kernels {

int64_t TensorView::numel() const { return NumElements(shape); }

std::size_t TensorView::nbytes() const {
  return static_cast<std::size_t>(numel()) * DTypeSize(dtype);
}

std::string TensorDesc::ToString() const {
  return absl::StrCat(DTypeName(dtype), ShapeToString(shape));
}

int64_t NumElements(ShapeSpan shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape ContiguousStrides(ShapeSpan shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::string ShapeToString(ShapeSpan shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

absl::Status ValidateShape(ShapeSpan shape, absl::string_view what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": negative dimension in shape ", ShapeToString(shape)));
    }
    if (__builtin_mul_overflow(n, d, &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": shape ", ShapeToString(shape), " has too many elements"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, absl::string_view what) {
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: axis %d is out of range for rank %d (valid: [%d, %d])", what, axis,
                        rank, -rank, rank - 1));
  }
  return axis < 0 ? axis + rank : axis;
}

absl::StatusOr<Shape> BroadcastShapes(ShapeSpan a, ShapeSpan b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    // Right-aligned: missing leading dims count as 1.
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "shapes %s and %s cannot be broadcast together (dim %d: %d vs %d)", ShapeToString(a),
          ShapeToString(b), static_cast<int64_t>(i) - static_cast<int64_t>(rank), da, db));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool IsUnidirectionallyBroadcastable(ShapeSpan from, ShapeSpan to) {
  if (from.size() > to.size()) return false;
  const std::size_t offset = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[offset + i]) return false;
  }
  return true;
}

Shape BroadcastStrides(ShapeSpan in, ShapeSpan out) {
  Shape strides(out.size(), 0);
  const Shape own = ContiguousStrides(in);
  const std::size_t offset = out.size() - in.size();
  for (std::size_t i = 0; i < in.size(); ++i) {
    strides[offset + i] = in[i] == 1 ? 0 : own[i];
  }
  return strides;
}

}  // namespace ndserve::kernels
