#ifndef NDSERVE_KERNELS_ATTRS_SHAPE_OF_H_
#define NDSERVE_KERNELS_ATTRS_SHAPE_OF_H_

// Attribute struct of Shape (Size has none). A plain value; see op_attrs.h for the
// conventions.

#include <algorithm>
#include <cstdint>
#include <limits>

namespace ndserve::kernels {

// The dims [start, end) of the input's shape (opset 15); negative values count from the
// rank and both are clamped to [0, rank], so an empty range gives an empty output.
struct ShapeAttrs {
  int64_t start = 0;
  int64_t end = std::numeric_limits<int64_t>::max();

  // The resolved range for an input of `rank` dims: 0 <= first <= last <= rank.
  int64_t First(int64_t rank) const { return Clamp(start, rank); }
  int64_t Last(int64_t rank) const { return std::max(Clamp(end, rank), First(rank)); }

 private:
  static int64_t Clamp(int64_t v, int64_t rank) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  }
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ATTRS_SHAPE_OF_H_
