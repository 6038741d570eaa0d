// The CPU's one strided gather: y[i] = x[sum(idx_d * strides[d])] over the multi-index of
// output element i. Transpose, Einsum's operand copies (a TransposePlan, kernels/plans.h)
// and Slice, Expand and Tile (a StridedPlan, kernels/data_plans.h) are all this walk.
#ifndef NDSERVE_KERNELS_CPU_STRIDED_GATHER_H_
#define NDSERVE_KERNELS_CPU_STRIDED_GATHER_H_

#include <cstdint>
#include <cstring>

#include "kernels/cpu/row_walker.h"
#include "kernels/data_plans.h"
#include "kernels/plans.h"
#include "memory/dtype.h"

namespace ndserve::kernels::cpu {

// Calls f(E{}) with E the unsigned integer as wide as `dtype`'s elements: the type the
// byte-moving kernels (this gather, Pad, Fill) instantiate for every dtype of that width.
template <typename F>
void ForElementSize(DType dtype, F&& f) {
  switch (DTypeSize(dtype)) {
    case 1:
      f(uint8_t{});
      break;
    case 2:
      f(uint16_t{});
      break;
    case 4:
      f(uint32_t{});
      break;
    default:
      f(uint64_t{});
      break;
  }
}

// E: any trivially copyable type as wide as the element (the callers pass an unsigned
// integer of the element's size, so one instance serves every dtype of that width).
// `dims` empty: one element.
template <typename E>
void StridedGather(const E* x, E* y, ShapeSpan dims, ShapeSpan strides, int64_t numel) {
  if (numel == 0) return;
  if (dims.empty()) {
    y[0] = x[0];
    return;
  }
  const int64_t n = dims.back();
  const int64_t s = strides.back();
  RowWalker<1> walk(dims, {strides});
  for (int64_t row = 0; row < numel / n; ++row, walk.Next()) {
    const E* xr = x + walk.offset(0);
    E* yr = y + row * n;
    if (s == 1) {
      std::memcpy(yr, xr, n * sizeof(E));
    } else {
      for (int64_t i = 0; i < n; ++i) yr[i] = xr[i * s];
    }
  }
}

template <typename E>
void StridedGather(const E* x, E* y, const TransposePlan& p) {
  StridedGather(x, y, ShapeSpan(p.out_dims), ShapeSpan(p.in_strides), p.numel);
}

template <typename E>
void StridedGather(const E* x, E* y, const StridedPlan& p) {
  StridedGather(x + p.offset, y, ShapeSpan(p.dims), ShapeSpan(p.strides), p.numel);
}

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_STRIDED_GATHER_H_
