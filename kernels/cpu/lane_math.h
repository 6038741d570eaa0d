#ifndef NDSERVE_KERNELS_CPU_LANE_MATH_H_
#define NDSERVE_KERNELS_CPU_LANE_MATH_H_

// Row reductions and exp written so the compiler vectorizes them (kernels/cpu is built
// with -O3 and -fno-trapping-math, no -ffast-math): a plain running sum or max is a
// serial chain GCC may not reorder, and libm's expf is a call per element. Used by
// Softmax, LayerNormalization and the recurrent kernels. Header-only; reentrant.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/elementwise_ops.h"

namespace ndserve::kernels::cpu {

// Partial results kept side by side, one vector register's worth.
inline constexpr int64_t kLanes = 8;

// sum over i of f(x[i]), in kLanes partial sums.
template <typename F>
float LaneSum(const float* x, int64_t n, F f) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += f(x[i + l]);
  }
  float sum = 0.0f;
  for (; i < n; ++i) sum += f(x[i]);
  for (int64_t l = 0; l < kLanes; ++l) sum += acc[l];
  return sum;
}

// max over x, skipping NaNs as std::max(m, x) does; -inf for n == 0.
inline float LaneMax(const float* x, int64_t n) {
  constexpr float kLow = -std::numeric_limits<float>::infinity();
  float acc[kLanes] = {kLow, kLow, kLow, kLow, kLow, kLow, kLow, kLow};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t l = 0; l < kLanes; ++l) acc[l] = acc[l] < x[i + l] ? x[i + l] : acc[l];
  }
  float m = kLow;
  for (; i < n; ++i) m = m < x[i] ? x[i] : m;
  for (int64_t l = 0; l < kLanes; ++l) m = m < acc[l] ? acc[l] : m;
  return m;
}

// exp(x) for x <= 0 and the sigmoid, as every host loop computes them
// (elementwise_ops.h).
inline float ExpNonPositive(float x) { return HostExpNonPositive(x); }
inline float LaneSigmoid(float x) { return HostSigmoid(x); }

// tanh(x): (1 - e) / (1 + e) with e = exp(-2|x|), sign restored; below |x| = 0.25, where
// 1 - e would cancel, its odd Taylor series to x^9 (next term under 1e-8 relative).
// Absolute error about 1e-7; NaN stays NaN.
inline float LaneTanh(float x) {
  const float ax = std::fabs(x);
  const float e = ExpNonPositive(-2.0f * ax);
  const float big = (1.0f - e) / (1.0f + e);
  const float x2 = ax * ax;
  float p = 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  const float small = ax + ax * x2 * p;
  const float t = ax < 0.25f ? small : big;
  return std::copysign(t, x);
}

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_LANE_MATH_H_
