// Softmax over one axis (ONNX opset >= 13 semantics), max-subtracted for stability. Rows
// along the last axis (every transformer's attention) use the vectorizable lane_math.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/parallel.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

// Elements per ParallelFor chunk: below this a thread handoff costs more than it saves.
constexpr int64_t kParallelGrain = int64_t{16} << 10;

// Eight floats as one value (GCC vector extension), and the same at any float's
// alignment, allowed to alias floats: how rows are read (as in row_gemm.cc).
typedef float V8 __attribute__((vector_size(32)));
typedef float V8u __attribute__((vector_size(32), aligned(4), may_alias));

// max over x[0, n), skipping NaNs, -inf for n == 0: LaneMax's result, in vector registers.
// GCC left LaneMax's eight-lane select scalar here (a fifth of a 128-wide softmax row's
// time at seq 128; docs/design.md section 4).
__attribute__((always_inline)) inline float RowMax(const float* x, int64_t n) {
  constexpr float kLow = -std::numeric_limits<float>::infinity();
  V8 acc = {kLow, kLow, kLow, kLow, kLow, kLow, kLow, kLow};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const V8 v = *reinterpret_cast<const V8u*>(x + i);
    acc = acc < v ? v : acc;
  }
  float m = kLow;
  for (; i < n; ++i) m = m < x[i] ? x[i] : m;
  for (int l = 0; l < 8; ++l) m = m < acc[l] ? acc[l] : m;
  return m;
}

// Softmax of rows [first, end) of n values each.
NDS_CPU_CLONES
void SoftmaxRows(const float* x, float* y, int64_t first, int64_t end, int64_t n) {
  for (int64_t o = first; o < end; ++o) {
    const float* xr = x + o * n;
    float* yr = y + o * n;
    const float mx = RowMax(xr, n);
    for (int64_t i = 0; i < n; ++i) yr[i] = ExpNonPositive(xr[i] - mx);
    const float sum = LaneSum(yr, n, [](float v) { return v; });
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
  }
}

}  // namespace

absl::Status Softmax(const KernelContext&, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const int64_t axis =
      *NormalizeAxis(std::get<SoftmaxAttrs>(attrs).axis, in[0].shape.size(), "Softmax");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  const int64_t n = p.axis_dim, inner = p.inner;
  if (n == 0) return absl::OkStatus();
  if (inner == 1) {
    // Rows spread over ParallelFor's threads: a transformer's scores are heads * seq rows.
    ParallelFor(p.outer, std::max<int64_t>(1, kParallelGrain / n),
                [&](int64_t first, int64_t end) { SoftmaxRows(x, y, first, end, n); });
    return absl::OkStatus();
  }
  // Non-last axis: walk [axis, inner] blocks row by row so the inner loops stay contiguous.
  std::vector<float> mx(inner), sum(inner);
  for (int64_t o = 0; o < p.outer; ++o) {
    const float* xb = x + o * n * inner;
    float* yb = y + o * n * inner;
    std::fill(mx.begin(), mx.end(), -std::numeric_limits<float>::infinity());
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j) mx[j] = std::max(mx[j], xb[i * inner + j]);
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j) {
        const float e = std::exp(xb[i * inner + j] - mx[j]);
        yb[i * inner + j] = e;
        sum[j] += e;
      }
    }
    for (int64_t j = 0; j < inner; ++j) sum[j] = 1.0f / sum[j];
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j) yb[i * inner + j] *= sum[j];
    }
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
