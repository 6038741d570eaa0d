#ifndef NDSERVE_KERNELS_DATA_PLANS_H_
#define NDSERVE_KERNELS_DATA_PLANS_H_

// Index plans of the data-movement family (Slice, Expand, Tile, Pad, Trilu, Range,
// ConstantOfShape), shared by their rules (kernels/rules/data.cc), which validate through
// them, and by the CPU and CUDA kernels, which rebuild them from already validated shapes.
// Every kernel here moves whole elements, so plans count elements, never bytes of a dtype.
// Pure functions over plain values; thread-safe.

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/attrs/data.h"
#include "kernels/tensor_view.h"
#include "memory/dtype.h"

namespace ndserve::kernels {

// y[i] = x[offset + sum(idx_d * strides[d])] where (idx_d) is output element i's
// multi-index over `dims`. Slice (strides scaled by the steps, possibly negative), Expand
// (stride 0 on broadcast dims) and Tile (a repeat dim of stride 0 before each input dim)
// are all this one walk. Size-1 dims are dropped and dims that walk as one are merged, so
// it reaches the kernels with few dims.
struct StridedPlan {
  Shape dims;     // empty: one element (when numel is 1)
  Shape strides;  // element strides into x, per dim
  int64_t offset = 0;
  int64_t numel = 0;
};
StridedPlan MergeStridedPlan(ShapeSpan dims, ShapeSpan strides, int64_t offset);

// Slice of `in`: the output shape, or INVALID_ARGUMENT naming Slice (mismatched list
// lengths, an axis out of range or repeated, a zero step).
struct SliceResolved {
  Shape out_shape;
  StridedPlan plan;
};
absl::StatusOr<SliceResolved> ResolveSlice(ShapeSpan in, const SliceAttrs& attrs);

// Expand of `in` to `out` (BroadcastShapes(in, attrs.shape)).
StridedPlan MakeExpandPlan(ShapeSpan in, ShapeSpan out);
// Tile of `in` by `repeats` (one per dim, validated).
StridedPlan MakeTilePlan(ShapeSpan in, absl::Span<const int64_t> repeats);

// Where output index `o` of a padded dim reads the input: an index in [0, n), or -1 for
// the constant fill. `begin` is the dim's leading pad (negative crops); reflect needs
// begin and the trailing pad below n (the rules check it).
inline int64_t PadSourceIndex(int64_t o, int64_t begin, int64_t n, PadMode mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return i < 0 ? 0 : n - 1;
    case PadMode::kReflect:
      return i < 0 ? -i : 2 * (n - 1) - i;
  }
  return -1;
}

// The element count of Range (ceil((limit - start) / delta), at least 0); INVALID_ARGUMENT
// for a zero delta or a count past int64.
absl::StatusOr<int64_t> RangeCount(const RangeAttrs& attrs);

// `v` converted to `dtype` (saturating for out-of-range floats to integers, like Cast),
// as the element's little-endian bits in the low DTypeSize(dtype) bytes.
uint64_t ScalarBits(DType dtype, const ScalarValue& v);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_DATA_PLANS_H_
