#ifndef NDSERVE_KERNELS_TOPK_OPS_H_
#define NDSERVE_KERNELS_TOPK_OPS_H_

// Per-row selection shared by the CPU and CUDA kernels of TopK and ArgMax, so both devices
// rank elements the same way: NaN ranks above every number (as numpy's sort and argmax
// place it), and equal values rank by lower index (TopK; ArgMax unless select_last_index).
// Plain C++17 (nvcc compiles it); rows are strided so an axis that is not the last one
// needs no transposed copy. Stateless; thread-safe.

#include <cstdint>
#include <type_traits>

#include "kernels/elementwise_ops.h"  // NDS_HD_OP

namespace ndserve::kernels {

template <typename T>
struct RankOrder {
  bool largest;

  NDS_HD_OP static bool IsNan(T v) {
    if constexpr (std::is_floating_point<T>::value) {
      return v != v;
    } else {
      return false;
    }
  }
  // Value a ranks strictly before value b.
  NDS_HD_OP bool Before(T a, T b) const {
    const bool na = IsNan(a), nb = IsNan(b);
    if (na || nb) return largest ? (na && !nb) : (!na && nb);
    return largest ? a > b : a < b;
  }
  // Element (va, ia) ranks before (vb, ib): a strict total order over distinct indices.
  NDS_HD_OP bool Better(T va, int64_t ia, T vb, int64_t ib) const {
    if (Before(va, vb)) return true;
    if (Before(vb, va)) return false;
    return ia < ib;
  }
};

// The k best of x[0], x[stride], ..., x[(n-1) * stride] (k <= n), written best first to
// values[s * out_stride] and indices[s * out_stride], s < k. The output slots double as a
// binary heap with the worst kept element at slot 0, so no working memory is needed:
// O(n log k) to select, O(k log k) to sort.
template <typename T>
class TopKRow {
 public:
  NDS_HD_OP TopKRow(RankOrder<T> order, T* values, int64_t* indices, int64_t out_stride)
      : order_(order), v_(values), i_(indices), s_(out_stride) {}

  NDS_HD_OP void Run(const T* x, int64_t n, int64_t stride, int64_t k) {
    if (k <= 0) return;
    int64_t m = 0;
    for (int64_t j = 0; j < n; ++j) {
      const T v = x[j * stride];
      if (m < k) {
        V(m) = v;
        I(m) = j;
        SiftUp(m);
        ++m;
      } else if (order_.Better(v, j, V(0), I(0))) {
        V(0) = v;
        I(0) = j;
        SiftDown(0, k);
      }
    }
    // Heap sort: move the worst to the back until slot 0 holds the best.
    for (int64_t end = k - 1; end > 0; --end) {
      Swap(0, end);
      SiftDown(0, end);
    }
  }

 private:
  NDS_HD_OP T& V(int64_t slot) { return v_[slot * s_]; }
  NDS_HD_OP int64_t& I(int64_t slot) { return i_[slot * s_]; }
  // Slot a holds a worse element than slot b.
  NDS_HD_OP bool Worse(int64_t a, int64_t b) { return order_.Better(V(b), I(b), V(a), I(a)); }
  NDS_HD_OP void Swap(int64_t a, int64_t b) {
    const T v = V(a);
    V(a) = V(b);
    V(b) = v;
    const int64_t i = I(a);
    I(a) = I(b);
    I(b) = i;
  }
  NDS_HD_OP void SiftUp(int64_t slot) {
    while (slot > 0) {
      const int64_t parent = (slot - 1) / 2;
      if (!Worse(slot, parent)) return;
      Swap(slot, parent);
      slot = parent;
    }
  }
  NDS_HD_OP void SiftDown(int64_t slot, int64_t size) {
    for (;;) {
      const int64_t left = 2 * slot + 1;
      if (left >= size) return;
      int64_t child = left;
      if (left + 1 < size && Worse(left + 1, left)) child = left + 1;
      if (!Worse(child, slot)) return;
      Swap(slot, child);
      slot = child;
    }
  }

  RankOrder<T> order_;
  T* v_;
  int64_t* i_;
  int64_t s_;
};

// Index of the largest (smallest with largest false: ArgMin) of x[0], x[stride], ...,
// x[(n-1) * stride] (n >= 1): the first one among equals, or the last with select_last.
template <typename T>
NDS_HD_OP int64_t ArgMaxRow(const T* x, int64_t n, int64_t stride, bool select_last,
                            bool largest = true) {
  const RankOrder<T> order{largest};
  int64_t best = 0;
  T bv = x[0];
  for (int64_t j = 1; j < n; ++j) {
    const T v = x[j * stride];
    if (order.Before(v, bv) || (select_last && !order.Before(bv, v))) {
      best = j;
      bv = v;
    }
  }
  return best;
}

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_TOPK_OPS_H_
