// Resize on the CPU: nearest or bilinear over the last two dims. The source rows and
// columns are worked out once per call (two small index tables), then every plane is a
// gather with them.
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/resize_coord.h"
#include "kernels/resize_plan.h"

namespace ndserve::kernels::cpu {
namespace {

struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<float> w1;
};

Taps MakeTaps(const ResizeAttrs& a, int64_t in_len, int64_t out_len, float scale) {
  Taps t;
  t.i0.resize(out_len);
  t.i1.resize(out_len);
  t.w1.resize(out_len);
  for (int64_t o = 0; o < out_len; ++o) {
    const float x =
        ResizeSourceCoord(static_cast<int>(a.coord), static_cast<float>(o), scale, in_len, out_len);
    if (a.mode == ResizeMode::kNearest) {
      t.i0[o] = t.i1[o] = ResizeNearestIndex(static_cast<int>(a.nearest), x, in_len);
      t.w1[o] = 0.0f;
    } else {
      ResizeLinearTaps(x, in_len, &t.i0[o], &t.i1[o], &t.w1[o]);
    }
  }
  return t;
}

}  // namespace

absl::Status Resize(const KernelContext&, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ResizeAttrs& a = std::get<ResizeAttrs>(attrs);
  NDS_ASSIGN_OR_RETURN(const ResizePlan p, MakeResizePlan(a, in[0].shape));
  if (out[0].numel() == 0) return absl::OkStatus();
  // Index tables of out_h + out_w entries: small next to the tensors they index.
  const Taps rows = MakeTaps(a, p.in_h, p.out_h, p.scale_h);
  const Taps cols = MakeTaps(a, p.in_w, p.out_w, p.scale_w);
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  const bool linear = a.mode == ResizeMode::kLinear;
  for (int64_t pl = 0; pl < p.planes; ++pl) {
    const float* xp = x + pl * p.in_h * p.in_w;
    float* yp = y + pl * p.out_h * p.out_w;
    for (int64_t r = 0; r < p.out_h; ++r) {
      const float* x0 = xp + rows.i0[r] * p.in_w;
      float* yr = yp + r * p.out_w;
      if (!linear) {
        for (int64_t c = 0; c < p.out_w; ++c) yr[c] = x0[cols.i0[c]];
        continue;
      }
      const float* x1 = xp + rows.i1[r] * p.in_w;
      const float wy = rows.w1[r];
      for (int64_t c = 0; c < p.out_w; ++c) {
        const float wx = cols.w1[c];
        const float top = x0[cols.i0[c]] * (1.0f - wx) + x0[cols.i1[c]] * wx;
        const float bottom = x1[cols.i0[c]] * (1.0f - wx) + x1[cols.i1[c]] * wx;
        yr[c] = top * (1.0f - wy) + bottom * wy;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
