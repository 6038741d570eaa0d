// The CPU's one strided gather for a transpose plan (kernels/plans.h): Transpose itself
// and the kernels that rearrange an operand before a GEMM (Einsum) share it.
#ifndef NDSERVE_KERNELS_CPU_TRANSPOSE_LOOP_H_
#define NDSERVE_KERNELS_CPU_TRANSPOSE_LOOP_H_

#include <cstdint>

#include "kernels/cpu/row_walker.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {

// E: any trivially copyable type as wide as the element (Transpose passes an unsigned
// integer of the element's size, so one instance serves every dtype of that width).
template <typename E>
void TransposeLoop(const E* x, E* y, const TransposePlan& p) {
  if (p.numel == 0) return;
  if (p.out_dims.empty()) {
    y[0] = x[0];
    return;
  }
  const int64_t n = p.out_dims.back();
  const int64_t s = p.in_strides.back();
  RowWalker<1> walk(p.out_dims, {ShapeSpan(p.in_strides)});
  for (int64_t row = 0; row < p.numel / n; ++row, walk.Next()) {
    const E* xr = x + walk.offset(0);
    E* yr = y + row * n;
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i * s];
  }
}

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_TRANSPOSE_LOOP_H_
