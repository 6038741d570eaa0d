// GridSample on the CPU: per output position, the taps of its grid point
// (kernels/grid_sample_coord.h) are worked out once and applied to every channel.
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/grid_sample_coord.h"

namespace ndserve::kernels::cpu {

absl::Status GridSample(const KernelContext&, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const GridSampleAttrs& a = std::get<GridSampleAttrs>(attrs);
  const ShapeSpan xs = in[0].shape;
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3];
  const int64_t positions = in[1].shape[1] * in[1].shape[2];
  const float* x = in[0].as<const float>();
  const float* grid = in[1].as<const float>();
  float* y = out[0].as<float>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < positions; ++p) {
      const float* g = grid + (i * positions + p) * 2;
      const GridTaps t = GridSampleTaps(g[0], g[1], h, w, static_cast<int>(a.mode),
                                        static_cast<int>(a.padding), a.align_corners);
      for (int64_t ch = 0; ch < c; ++ch) {
        const float* plane = x + (i * c + ch) * h * w;
        float acc = 0.0f;
        for (int k = 0; k < t.n; ++k) {
          if (t.at[k] >= 0) acc += plane[t.at[k]] * t.w[k];
        }
        y[(i * c + ch) * positions + p] = acc;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
