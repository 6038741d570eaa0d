#ifndef NDSERVE_KERNELS_CPU_ROW_WALKER_H_
#define NDSERVE_KERNELS_CPU_ROW_WALKER_H_

#include <array>
#include <cstdint>

#include "kernels/tensor_view.h"

namespace ndserve::kernels::cpu {

// Walks the rows of a strided N-d index space: every multi-index of dims[0..rank-2] in
// row-major order, keeping one running element offset per operand. The caller loops over
// the innermost dim itself, which is where the compiler vectorizes. Offsets update
// incrementally (no division per row). Not thread-safe; cheap to construct.
template <std::size_t N>
class RowWalker {
 public:
  RowWalker(ShapeSpan dims, std::array<ShapeSpan, N> strides) : dims_(dims), strides_(strides) {
    idx_.assign(dims.size(), 0);
    offsets_.fill(0);
  }
  int64_t offset(std::size_t k) const { return offsets_[k]; }
  // Jumps to row `row` (counted from the first) from the first row: one division per dim,
  // for a caller that starts part way (a ParallelFor chunk).
  void Seek(int64_t row) {
    for (int d = static_cast<int>(dims_.size()) - 2; d >= 0 && row > 0; --d) {
      idx_[d] = row % dims_[d];
      row /= dims_[d];
      for (std::size_t k = 0; k < N; ++k) offsets_[k] += idx_[d] * strides_[k][d];
    }
  }
  void Next() {
    for (int d = static_cast<int>(dims_.size()) - 2; d >= 0; --d) {
      for (std::size_t k = 0; k < N; ++k) offsets_[k] += strides_[k][d];
      if (++idx_[d] < dims_[d]) return;
      for (std::size_t k = 0; k < N; ++k) offsets_[k] -= strides_[k][d] * dims_[d];
      idx_[d] = 0;
    }
  }

 private:
  ShapeSpan dims_;
  std::array<ShapeSpan, N> strides_;
  Shape idx_;
  std::array<int64_t, N> offsets_;
};

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_ROW_WALKER_H_
