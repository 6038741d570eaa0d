// BatchNormalization (inference) on the CPU: per channel, y = x * a + b with
// a = scale / sqrt(var + epsilon) and b = B - mean * a, folded once per channel.
#include <cmath>

#include "kernels/cpu/cpu_kernels.h"

namespace ndserve::kernels::cpu {

absl::Status BatchNormalization(const KernelContext&, absl::Span<const TensorView> in,
                                absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const float epsilon = std::get<BatchNormAttrs>(attrs).epsilon;
  const ShapeSpan xs = in[0].shape;
  const int64_t n = xs[0], c = xs[1];
  const int64_t inner = n * c == 0 ? 0 : in[0].numel() / (n * c);
  const float* x = in[0].as<const float>();
  const float* scale = in[1].as<const float>();
  const float* bias = in[2].as<const float>();
  const float* mean = in[3].as<const float>();
  const float* var = in[4].as<const float>();
  float* y = out[0].as<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    const float a = scale[ch] / std::sqrt(var[ch] + epsilon);
    const float b = bias[ch] - mean[ch] * a;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = x + (i * c + ch) * inner;
      float* yr = y + (i * c + ch) * inner;
      for (int64_t j = 0; j < inner; ++j) yr[j] = xr[j] * a + b;
    }
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
