// LayerNormalization (opset 17): per row of X.shape[axis:], y = (x - mean) / sqrt(var +
// eps) * scale + bias, with FP32 statistics (two passes: mean, then centered variance).
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/parallel.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

// Rows [first, end) of cols values each; bias, mean_out and inv_out optional.
NDS_CPU_CLONES
void NormalizeRows(const float* x, const float* scale, const float* bias, float epsilon,
                   int64_t cols, int64_t first, int64_t end, float* y, float* mean_out,
                   float* inv_out) {
  for (int64_t r = first; r < end; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const float sum = LaneSum(xr, cols, [](float v) { return v; });
    const float mean = cols > 0 ? sum / static_cast<float>(cols) : 0.0f;
    const float sq = LaneSum(xr, cols, [mean](float v) { return (v - mean) * (v - mean); });
    const float var = cols > 0 ? sq / static_cast<float>(cols) : 0.0f;
    const float inv = 1.0f / std::sqrt(var + epsilon);
    if (bias != nullptr) {
      for (int64_t i = 0; i < cols; ++i) yr[i] = (xr[i] - mean) * inv * scale[i] + bias[i];
    } else {
      for (int64_t i = 0; i < cols; ++i) yr[i] = (xr[i] - mean) * inv * scale[i];
    }
    if (mean_out != nullptr) mean_out[r] = mean;
    if (inv_out != nullptr) inv_out[r] = inv;
  }
}

}  // namespace

absl::Status LayerNormalization(const KernelContext&, absl::Span<const TensorView> in,
                                absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const LayerNormAttrs& a = std::get<LayerNormAttrs>(attrs);
  const int64_t axis = *NormalizeAxis(a.axis, in[0].shape.size(), "LayerNormalization");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  const int64_t rows = p.outer, cols = p.axis_dim * p.inner;
  const float* x = in[0].as<const float>();
  const float* scale = in[1].as<const float>();
  const float* bias = in.size() > 2 ? in[2].as<const float>() : nullptr;
  float* y = out[0].as<float>();
  float* mean_out = out.size() > 1 ? out[1].as<float>() : nullptr;
  float* inv_out = out.size() > 2 ? out[2].as<float>() : nullptr;
  // Rows spread over ParallelFor's threads (a sequence's tokens), chunks of >= 16K values.
  ParallelFor(rows, std::max<int64_t>(1, (int64_t{16} << 10) / std::max<int64_t>(cols, 1)),
              [&](int64_t first, int64_t end) {
                NormalizeRows(x, scale, bias, a.epsilon, cols, first, end, y, mean_out, inv_out);
              });
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
