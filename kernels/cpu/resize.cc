// Resize on the CPU: nearest, linear or cubic, over the last two dims (the last three of
// a 5-D X for nearest and linear). Each dim's taps (source indices and weights,
// kernels/resize_coord.h) are worked out once per call, then every plane is a separable
// weighted gather with them, summed in the same order as the CUDA kernel.
#include <cstring>
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/resize_coord.h"
#include "kernels/resize_plan.h"

namespace ndserve::kernels::cpu {
namespace {

// Per output coordinate of one dim: `n` input indices and weights.
struct Taps {
  int n = 1;
  std::vector<int64_t> i;  // out_len * n
  std::vector<float> w;
};

Taps MakeTaps(const ResizeAttrs& a, int mode, int64_t in_len, int64_t out_len, float scale) {
  Taps t;
  int64_t idx[4];
  float wt[4];
  t.i.reserve(out_len * 4);
  t.w.reserve(out_len * 4);
  for (int64_t o = 0; o < out_len; ++o) {
    t.n = ResizeTapsOf(mode, static_cast<int>(a.coord), static_cast<int>(a.nearest), a.cubic_a,
                       a.exclude_outside, o, scale, in_len, out_len, idx, wt);
    t.i.insert(t.i.end(), idx, idx + t.n);
    t.w.insert(t.w.end(), wt, wt + t.n);
  }
  return t;
}

// One tap of weight 1 per output coordinate: a dim that is not interpolated.
Taps IdentityTaps(int64_t len) {
  Taps t;
  for (int64_t o = 0; o < len; ++o) {
    t.i.push_back(o);
    t.w.push_back(1.0f);
  }
  return t;
}

// One output row of a linear resize: the same sums in the same order as the generic loop
// below (and the CUDA kernel), with the two column taps fixed and the (depth, row) taps'
// pointers and weights looked up once for the row rather than once per output.
void LinearRow(const Taps& deps, const Taps& rows, const Taps& cols, const float* xv,
               int64_t in_plane, int64_t in_w, int64_t z, int64_t r, int64_t out_w, float* y) {
  const float* src[2][2];
  float wr[2][2], wz[2];
  for (int kz = 0; kz < deps.n; ++kz) {
    wz[kz] = deps.w[z * deps.n + kz];
    for (int kr = 0; kr < 2; ++kr) {
      src[kz][kr] = xv + deps.i[z * deps.n + kz] * in_plane + rows.i[r * 2 + kr] * in_w;
      wr[kz][kr] = rows.w[r * 2 + kr];
    }
  }
  const int64_t* ci = cols.i.data();
  const float* cw = cols.w.data();
  for (int64_t c = 0; c < out_w; ++c) {
    const int64_t c0 = ci[2 * c], c1 = ci[2 * c + 1];
    const float w0 = cw[2 * c], w1 = cw[2 * c + 1];
    float acc = 0.0f;
    for (int kz = 0; kz < deps.n; ++kz) {
      const float top = src[kz][0][c0] * w0 + src[kz][0][c1] * w1;
      const float bottom = src[kz][1][c0] * w0 + src[kz][1][c1] * w1;
      const float plane = top * wr[kz][0] + bottom * wr[kz][1];
      acc = kz == 0 ? plane * wz[0] : acc + plane * wz[kz];
    }
    y[c] = acc;
  }
}

}  // namespace

absl::Status Resize(const KernelContext&, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ResizeAttrs& a = std::get<ResizeAttrs>(attrs);
  NDS_ASSIGN_OR_RETURN(const ResizePlan p, MakeResizePlan(a, in[0].shape));
  if (out[0].numel() == 0) return absl::OkStatus();
  if (IsIdentityResize(p)) {
    std::memcpy(out[0].data, in[0].data, in[0].nbytes());
    return absl::OkStatus();
  }
  const int mode = static_cast<int>(a.mode);
  // Index tables of a few entries per output coordinate: small next to the tensors.
  const Taps deps = p.depth && a.mode != ResizeMode::kCubic
                        ? MakeTaps(a, mode, p.in_d, p.out_d, p.scale_d)
                        : IdentityTaps(p.out_d);
  const Taps rows = MakeTaps(a, mode, p.in_h, p.out_h, p.scale_h);
  const Taps cols = MakeTaps(a, mode, p.in_w, p.out_w, p.scale_w);
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  const int64_t in_plane = p.in_h * p.in_w;
  for (int64_t pl = 0; pl < p.planes; ++pl) {
    const float* xv = x + pl * p.in_d * in_plane;
    for (int64_t z = 0; z < p.out_d; ++z) {
      for (int64_t r = 0; r < p.out_h; ++r) {
        if (a.mode == ResizeMode::kNearest) {  // one tap per dim: a gather
          const float* xr = xv + deps.i[z] * in_plane + rows.i[r] * p.in_w;
          for (int64_t c = 0; c < p.out_w; ++c) *y++ = xr[cols.i[c]];
          continue;
        }
        if (a.mode == ResizeMode::kLinear) {
          LinearRow(deps, rows, cols, xv, in_plane, p.in_w, z, r, p.out_w, y);
          y += p.out_w;
          continue;
        }
        for (int64_t c = 0; c < p.out_w; ++c, ++y) {
          // Each sum starts from its first product, as the CUDA kernel's does.
          float acc = 0.0f;
          for (int kz = 0; kz < deps.n; ++kz) {
            const float* xs = xv + deps.i[z * deps.n + kz] * in_plane;
            float plane = 0.0f;
            for (int kr = 0; kr < rows.n; ++kr) {
              const float* xr = xs + rows.i[r * rows.n + kr] * p.in_w;
              const int64_t* ci = &cols.i[c * cols.n];
              const float* cw = &cols.w[c * cols.n];
              float line = xr[ci[0]] * cw[0];
              for (int kc = 1; kc < cols.n; ++kc) line += xr[ci[kc]] * cw[kc];
              const float wr = rows.w[r * rows.n + kr];
              plane = kr == 0 ? line * wr : plane + line * wr;
            }
            const float wz = deps.w[z * deps.n + kz];
            acc = kz == 0 ? plane * wz : acc + plane * wz;
          }
          *y = acc;
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
