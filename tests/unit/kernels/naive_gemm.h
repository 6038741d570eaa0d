#ifndef NDSERVE_TESTS_UNIT_KERNELS_NAIVE_GEMM_H_
#define NDSERVE_TESTS_UNIT_KERNELS_NAIVE_GEMM_H_

// The reference the Gemm and MatMul paths' tests compare against:
// act(alpha * op(A) op(B) + beta * C) summed in double precision, row-major.

#include <cstdint>
#include <vector>

#include "kernels/gemm_epilogue.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {

// A is [m, k] ([k, m] when ta), B [k, n] ([n, k] when tb). C (none when null) broadcasts
// from c_shape: [], [1], [n], [m, 1], [1, n] or [m, n].
inline std::vector<float> NaiveGemm(const std::vector<float>& a, const std::vector<float>& b,
                                    const std::vector<float>* c, const Shape& c_shape,
                                    int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                                    float alpha = 1.0f, float beta = 1.0f,
                                    const GemmEpilogue& act = {}) {
  std::vector<float> y(m * n);
  const int64_t cols = c_shape.empty() ? 1 : c_shape.back();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        s += static_cast<double>(ta ? a[p * m + i] : a[i * k + p]) *
             static_cast<double>(tb ? b[j * k + p] : b[p * n + j]);
      }
      s *= alpha;
      if (c != nullptr) {
        const int64_t ci = c_shape.size() == 2 && c_shape[0] != 1 ? i : 0;
        const int64_t cj = cols == 1 ? 0 : j;
        s += beta * static_cast<double>((*c)[ci * cols + cj]);
      }
      y[i * n + j] = act(static_cast<float>(s));
    }
  }
  return y;
}

}  // namespace ndserve::kernels::testing

#endif  // NDSERVE_TESTS_UNIT_KERNELS_NAIVE_GEMM_H_
