#include "kernels/data_plans.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/cast_convert.h"

namespace ndserve::kernels {
namespace {

absl::Status SliceError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("Slice: ", message));
}

template <typename T>
uint64_t BitsOf(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

template <typename To>
uint64_t ConvertScalar(const ScalarValue& v) {
  if (v.is_real) return BitsOf(Convert<double, To>(v.real));
  return BitsOf(Convert<int64_t, To>(v.integer));
}

}  // namespace

StridedPlan MergeStridedPlan(ShapeSpan dims, ShapeSpan strides, int64_t offset) {
  StridedPlan p;
  p.offset = offset;
  p.numel = NumElements(dims);
  if (p.numel == 0) {
    p.dims = {0};
    p.strides = {0};
    return p;
  }
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    // The previous dim steps exactly over this one: walk the two as one.
    if (!p.dims.empty() && p.strides.back() == strides[d] * dims[d]) {
      p.dims.back() *= dims[d];
      p.strides.back() = strides[d];
      continue;
    }
    p.dims.push_back(dims[d]);
    p.strides.push_back(strides[d]);
  }
  return p;
}

absl::StatusOr<SliceResolved> ResolveSlice(ShapeSpan in, const SliceAttrs& a) {
  const int64_t rank = static_cast<int64_t>(in.size());
  const std::size_t n = a.starts.size();
  if (a.ends.size() != n || (!a.axes.empty() && a.axes.size() != n) ||
      (!a.steps.empty() && a.steps.size() != n)) {
    return SliceError(absl::StrFormat(
        "starts, ends, axes and steps must have the same length, got %d, %d, %d and %d", n,
        a.ends.size(), a.axes.size(), a.steps.size()));
  }
  std::vector<int64_t> start(rank, 0), step(rank, 1);
  Shape out(in.begin(), in.end());
  std::vector<bool> seen(rank, false);
  for (std::size_t k = 0; k < n; ++k) {
    const int64_t axis_in = a.axes.empty() ? static_cast<int64_t>(k) : a.axes[k];
    if (axis_in < -rank || axis_in >= rank) {
      return SliceError(
          absl::StrFormat("axis %d is out of range for data %s", axis_in, ShapeToString(in)));
    }
    const int64_t axis = axis_in < 0 ? axis_in + rank : axis_in;
    if (seen[axis]) return SliceError(absl::StrFormat("axis %d is given twice", axis_in));
    seen[axis] = true;
    int64_t s = a.steps.empty() ? 1 : a.steps[k];
    if (s == 0) return SliceError(absl::StrFormat("the step of axis %d is 0", axis_in));
    const int64_t dim = in[axis];
    // A step as long as the axis or longer takes at most one element, so it selects the
    // same as ±dim; clamping keeps -s and the stride (step * input stride) from
    // overflowing for steps near INT64_MIN / INT64_MAX.
    s = std::clamp<int64_t>(s, -std::max<int64_t>(dim, 1), std::max<int64_t>(dim, 1));
    int64_t b = a.starts[k], e = a.ends[k];
    // Negative indices count from the end; then clamp (ends of INT64_MAX / INT64_MIN, as
    // exporters write "to the end", land on the bounds without overflowing).
    if (b < 0) b = b < -dim ? -1 : b + dim;
    if (e < 0) e = e < -dim ? -1 : e + dim;
    int64_t count;
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > b ? (e - b - 1) / s + 1 : 0;
    } else {
      b = std::clamp<int64_t>(b, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count = b > e ? (b - e - 1) / (-s) + 1 : 0;
    }
    start[axis] = count > 0 ? b : 0;
    step[axis] = s;
    out[axis] = count;
  }
  const Shape in_strides = ContiguousStrides(in);
  int64_t offset = 0;
  Shape strides(rank);
  for (int64_t d = 0; d < rank; ++d) {
    offset += start[d] * in_strides[d];
    strides[d] = in_strides[d] * step[d];
  }
  SliceResolved r;
  r.plan = MergeStridedPlan(out, strides, NumElements(out) == 0 ? 0 : offset);
  r.out_shape = std::move(out);
  return r;
}

StridedPlan MakeExpandPlan(ShapeSpan in, ShapeSpan out) {
  const Shape strides = BroadcastStrides(in, out);
  return MergeStridedPlan(out, strides, 0);
}

StridedPlan MakeTilePlan(ShapeSpan in, absl::Span<const int64_t> repeats) {
  const Shape in_strides = ContiguousStrides(in);
  Shape dims, strides;
  for (std::size_t d = 0; d < in.size(); ++d) {
    // Output index along d is r * in[d] + i: a repeat dim (reading nothing new) outside
    // the input dim.
    dims.push_back(repeats[d]);
    strides.push_back(0);
    dims.push_back(in[d]);
    strides.push_back(in_strides[d]);
  }
  return MergeStridedPlan(dims, strides, 0);
}

absl::StatusOr<int64_t> RangeCount(const RangeAttrs& a) {
  if (a.start.is_real) {
    const double delta = a.delta.real;
    if (delta == 0.0 || std::isnan(delta)) {
      return absl::InvalidArgumentError("Range: delta must not be 0");
    }
    const double n = std::ceil((a.limit.real - a.start.real) / delta);
    if (std::isnan(n)) return absl::InvalidArgumentError("Range: start or limit is NaN");
    if (n <= 0) return 0;
    if (n >= 9.0e18) return absl::InvalidArgumentError("Range: too many elements");
    return static_cast<int64_t>(n);
  }
  const int64_t delta = a.delta.integer;
  if (delta == 0) return absl::InvalidArgumentError("Range: delta must not be 0");
  int64_t diff;
  if (__builtin_sub_overflow(a.limit.integer, a.start.integer, &diff)) {
    return absl::InvalidArgumentError("Range: too many elements");
  }
  if ((diff > 0) != (delta > 0) || diff == 0) return 0;
  // ceil(diff / delta) with both of the same sign.
  const int64_t q = diff / delta;
  return q * delta == diff ? q : q + 1;
}

uint64_t ScalarBits(DType dtype, const ScalarValue& v) {
  switch (dtype) {
    case DType::kBool:
      return ConvertScalar<bool>(v);
    case DType::kUint8:
      return ConvertScalar<uint8_t>(v);
    case DType::kUint16:
      return ConvertScalar<uint16_t>(v);
    case DType::kUint32:
      return ConvertScalar<uint32_t>(v);
    case DType::kUint64:
      return ConvertScalar<uint64_t>(v);
    case DType::kInt8:
      return ConvertScalar<int8_t>(v);
    case DType::kInt16:
      return ConvertScalar<int16_t>(v);
    case DType::kInt32:
      return ConvertScalar<int32_t>(v);
    case DType::kInt64:
      return ConvertScalar<int64_t>(v);
    case DType::kFp16:
      return ConvertScalar<Half>(v);
    case DType::kBf16:
      return ConvertScalar<BFloat16>(v);
    case DType::kFp32:
      return ConvertScalar<float>(v);
    case DType::kFp64:
      return ConvertScalar<double>(v);
    case DType::kBytes:
      return 0;
  }
  return 0;
}

}  // namespace ndserve::kernels
