// InstanceNormalization on the CPU: each (n, c) plane of X is normalized by its own mean
// and variance, y = (x - mean) / sqrt(var + epsilon) * scale[c] + B[c], with FP32
// statistics in two passes (mean, then centered variance) like LayerNormalization. Both
// run over x - x[0]: a plane is often thousands of values with a common offset (an image,
// a GroupNorm group), and FP32 sums of the raw values, or the mean rounded at the offset's
// magnitude, would lose the spread.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {
namespace {

// Planes [first, end) of `inner` values each; plane p is channel p % c.
NDS_CPU_CLONES
void NormalizePlanes(const float* x, const float* scale, const float* bias, float epsilon,
                     int64_t c, int64_t inner, int64_t first, int64_t end, float* y) {
  for (int64_t p = first; p < end; ++p) {
    const float* xp = x + p * inner;
    float* yp = y + p * inner;
    // Everything relative to the plane's first value: m is the mean of x - pivot, small
    // and exact enough, where the mean itself would round at the offset's magnitude.
    const float pivot = xp[0];
    const float m =
        LaneSum(xp, inner, [pivot](float v) { return v - pivot; }) / static_cast<float>(inner);
    const float var =
        LaneSum(xp, inner, [pivot, m](float v) { return (v - pivot - m) * (v - pivot - m); }) /
        static_cast<float>(inner);
    const float a = scale[p % c] / std::sqrt(var + epsilon);
    const float b = bias[p % c];
    for (int64_t i = 0; i < inner; ++i) yp[i] = (xp[i] - pivot - m) * a + b;
  }
}

}  // namespace

absl::Status InstanceNormalization(const KernelContext&, absl::Span<const TensorView> in,
                                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const float epsilon = std::get<BatchNormAttrs>(attrs).epsilon;
  const int64_t c = in[0].shape[1];
  const int64_t planes = in[0].shape[0] * c;
  const int64_t inner = planes == 0 ? 0 : in[0].numel() / planes;
  if (inner == 0) return absl::OkStatus();
  const float* x = in[0].as<const float>();
  const float* scale = in[1].as<const float>();
  const float* bias = in[2].as<const float>();
  float* y = out[0].as<float>();
  // Planes spread over ParallelFor's threads, chunks of >= 16K values.
  ParallelFor(planes, std::max<int64_t>(1, (int64_t{16} << 10) / inner),
              [&](int64_t first, int64_t end) {
                NormalizePlanes(x, scale, bias, epsilon, c, inner, first, end, y);
              });
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
