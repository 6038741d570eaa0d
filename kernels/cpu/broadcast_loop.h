#ifndef NDSERVE_KERNELS_CPU_BROADCAST_LOOP_H_
#define NDSERVE_KERNELS_CPU_BROADCAST_LOOP_H_

// The CPU walk of a BroadcastPlan (plans.h) for two or three operands: rows through
// RowWalker, and per row a plain inner loop specialized on which operands are contiguous
// (stride 1) or broadcast (stride 0), so the compiler vectorizes the common cases. Element
// types of the operands and the output may differ (comparisons write BOOL bytes). The
// output may be exactly an operand of the output's shape (each element is read before
// it is written). Header-only templates; reentrant.

#include <cstdint>

#include "kernels/cpu/row_walker.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {

// Rows of a BroadcastPlan: the output's rows of p.dims.back() elements (1 for a scalar).
inline int64_t BroadcastRows(const BroadcastPlan& p) {
  return p.dims.empty() || p.numel == 0 ? (p.numel > 0 ? 1 : 0) : p.numel / p.dims.back();
}

// Output rows [row0, row1) of BroadcastBinary, so a caller can spread rows over threads.
template <typename A, typename B, typename O, typename Op>
__attribute__((always_inline)) inline void BroadcastBinaryRows(const A* a, const B* b, O* out,
                                                               const BroadcastPlan& p,
                                                               int64_t row0, int64_t row1, Op op) {
  if (p.numel == 0 || row0 >= row1) return;
  if (p.dims.empty()) {
    out[0] = op(a[0], b[0]);
    return;
  }
  const int64_t n = p.dims.back();
  const int64_t sa = p.a_strides.back(), sb = p.b_strides.back();
  RowWalker<2> walk(p.dims, {ShapeSpan(p.a_strides), ShapeSpan(p.b_strides)});
  walk.Seek(row0);
  for (int64_t row = row0; row < row1; ++row, walk.Next()) {
    const A* ra = a + walk.offset(0);
    const B* rb = b + walk.offset(1);
    O* ro = out + row * n;
    // After merging, an operand's innermost stride is 1 or 0 (broadcast).
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) ro[i] = op(ra[i], rb[i]);
    } else if (sa == 1) {
      const B bv = rb[0];
      for (int64_t i = 0; i < n; ++i) ro[i] = op(ra[i], bv);
    } else if (sb == 1) {
      const A av = ra[0];
      for (int64_t i = 0; i < n; ++i) ro[i] = op(av, rb[i]);
    } else {
      const O v = op(ra[0], rb[0]);
      for (int64_t i = 0; i < n; ++i) ro[i] = v;
    }
  }
}

// out[i] = op(a[..], b[..]) over the plan of MakeBroadcastPlan(out, a, b).
template <typename A, typename B, typename O, typename Op>
void BroadcastBinary(const A* a, const B* b, O* out, const BroadcastPlan& p, Op op) {
  BroadcastBinaryRows(a, b, out, p, 0, BroadcastRows(p), op);
}

// out[i] = op(a[..], b[..], c[..]) over the plan of MakeBroadcastPlan(out, a, b, c). The
// inner loop indexes each operand by its stride (0 or 1), which stays vectorizable.
template <typename A, typename B, typename C, typename O, typename Op>
void BroadcastTernary(const A* a, const B* b, const C* c, O* out, const BroadcastPlan& p, Op op) {
  if (p.numel == 0) return;
  if (p.dims.empty()) {
    out[0] = op(a[0], b[0], c[0]);
    return;
  }
  const int64_t n = p.dims.back();
  const int64_t sa = p.a_strides.back(), sb = p.b_strides.back(), sc = p.c_strides.back();
  RowWalker<3> walk(p.dims,
                    {ShapeSpan(p.a_strides), ShapeSpan(p.b_strides), ShapeSpan(p.c_strides)});
  for (int64_t row = 0; row < p.numel / n; ++row, walk.Next()) {
    const A* ra = a + walk.offset(0);
    const B* rb = b + walk.offset(1);
    const C* rc = c + walk.offset(2);
    O* ro = out + row * n;
    if (sa == 1 && sb == 1 && sc == 1) {
      for (int64_t i = 0; i < n; ++i) ro[i] = op(ra[i], rb[i], rc[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) ro[i] = op(ra[i * sa], rb[i * sb], rc[i * sc]);
    }
  }
}

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_BROADCAST_LOOP_H_
