// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool on the CPU: a direct walk of
// each output's window, clipped to the input (the padding contributes nothing to a max,
// and to an average only through its divisor when count_include_pad). A 1-D or 2-D
// MaxPool without indices takes its window a tap at a time over whole output rows
// instead (MaxPoolRows), and a 3x3 one at stride 1 or 2 a separable max (max_pool3x3.cc).
// Planes are split over ParallelFor's threads (parallel.h).
#include <algorithm>
#include <limits>

#include "base/status_macros.h"
#include "kernels/conv_geometry.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/lane_math.h"
#include "kernels/cpu/max_pool3x3.h"
#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {
namespace {

// Planes of `plane` floats per ParallelFor chunk of a global pool: about 64K floats, so a
// small pool (the 1x1 planes after a squeeze) stays on the calling thread.
int64_t PlanesPerChunk(int64_t plane) {
  return std::max<int64_t>(1, (int64_t{64} << 10) / std::max<int64_t>(1, plane));
}

// One dim of an output's window: input indices [first, end) stepped by the dilation,
// with the first tap's index clipped into the input.
struct Span1 {
  int64_t first, end, step;  // taps first, first + step, ... < end
  int64_t padded_count;      // taps in the window counting padding (not the ceil overhang)
};

Span1 Clip(int64_t start, int64_t k, int64_t dil, int64_t size, int64_t pad_end) {
  Span1 s{start, start + (k - 1) * dil + 1, dil, 0};
  // Taps that land in the padding count for count_include_pad; those past the end padding
  // (ceil_mode's overhang) never do.
  const int64_t limit = std::min(s.end, size + pad_end);
  s.padded_count = limit > start ? (limit - start + dil - 1) / dil : 0;
  if (s.first < 0) s.first += ((-s.first + dil - 1) / dil) * dil;
  s.end = std::min(s.end, size);
  return s;
}

// Planes [first, end) of a pooling op (volumes when 3-D; a 2-D op has depth 1).
template <bool kMax>
void PoolPlanes(const ConvGeometry& g, const PoolAttrs& a, const float* x, float* y,
                int64_t* indices, int64_t first, int64_t end) {
  const int64_t hw = g.in_h * g.in_w;
  for (int64_t pl = first; pl < end; ++pl) {
    const float* xp = x + pl * g.in_plane();
    int64_t o = pl * g.out_plane();
    for (int64_t z = 0; z < g.out_d; ++z) {
      const Span1 ds = Clip(z * g.stride_d - g.pad_front, g.k_d, g.dil_d, g.in_d, g.pad_back);
      for (int64_t r = 0; r < g.out_h; ++r) {
        const Span1 hs = Clip(r * g.stride_h - g.pad_top, g.k_h, g.dil_h, g.in_h, g.pad_bottom);
        for (int64_t s = 0; s < g.out_w; ++s, ++o) {
          const Span1 ws = Clip(s * g.stride_w - g.pad_left, g.k_w, g.dil_w, g.in_w, g.pad_right);
          if constexpr (kMax) {
            float best = -std::numeric_limits<float>::infinity();
            int64_t best_at = -1;
            for (int64_t d = ds.first; d < ds.end; d += ds.step) {
              for (int64_t h = hs.first; h < hs.end; h += hs.step) {
                for (int64_t w = ws.first; w < ws.end; w += ws.step) {
                  const int64_t at = d * hw + h * g.in_w + w;
                  const float v = xp[at];
                  // The first NaN wins and stays, as in a max that propagates NaN.
                  if (best_at < 0 || v > best || (v != v && best == best)) {
                    best = v;
                    best_at = at;
                  }
                }
              }
            }
            y[o] = best;
            if (indices != nullptr) indices[o] = best_at < 0 ? -1 : pl * g.in_plane() + best_at;
          } else {
            float sum = 0.0f;
            int64_t count = 0;
            for (int64_t d = ds.first; d < ds.end; d += ds.step) {
              for (int64_t h = hs.first; h < hs.end; h += hs.step) {
                for (int64_t w = ws.first; w < ws.end; w += ws.step) {
                  sum += xp[d * hw + h * g.in_w + w];
                  ++count;
                }
              }
            }
            if (a.count_include_pad) count = ds.padded_count * hs.padded_count * ws.padded_count;
            y[o] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
          }
        }
      }
    }
  }
}

// MaxPool planes [first, end) without the indices output: for each output row, every
// tap of the window is one pass over the row's valid outputs, so the max is a
// vectorizable loop rather than a walk of each output's window (resnet's stem pool was
// 6% of its profile that way). Taps in the padding are skipped, as in PoolPlanes.
void MaxPoolRows(const ConvGeometry& g, const float* x, float* y, int64_t first, int64_t end) {
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
  for (int64_t pl = first; pl < end; ++pl) {
    const float* xp = x + pl * g.in_plane();
    float* yp = y + pl * g.out_plane();
    for (int64_t r = 0; r < g.out_h; ++r) {
      float* __restrict yr = yp + r * g.out_w;
      std::fill(yr, yr + g.out_w, -std::numeric_limits<float>::infinity());
      for (int64_t ki = 0; ki < g.k_h; ++ki) {
        const int64_t ih = r * g.stride_h - g.pad_top + ki * g.dil_h;
        if (ih < 0 || ih >= g.in_h) continue;
        const float* xr = xp + ih * g.in_w;
        for (int64_t kj = 0; kj < g.k_w; ++kj) {
          // Outputs s whose tap reads column s * sw + off inside [0, in_w).
          const int64_t off = kj * g.dil_w - g.pad_left;
          const int64_t lo = std::clamp<int64_t>(ceil_div(-off, g.stride_w), 0, g.out_w);
          const int64_t hi = std::clamp<int64_t>(ceil_div(g.in_w - off, g.stride_w), lo, g.out_w);
          // A NaN, once in, stays: v > NaN is false, and only a NaN v replaces it.
          if (g.stride_w == 1) {
            for (int64_t s = lo; s < hi; ++s) {
              const float v = xr[s + off];
              yr[s] = (v > yr[s] || v != v) ? v : yr[s];
            }
          } else {
            for (int64_t s = lo; s < hi; ++s) {
              const float v = xr[s * g.stride_w + off];
              yr[s] = (v > yr[s] || v != v) ? v : yr[s];
            }
          }
        }
      }
    }
  }
}

// The pool's geometry and how many planes it runs over. A 3-D window one slice deep that
// steps one slice at a time with no depth padding (the (1, 3, 3) MaxPool3d of video
// ResNets) pools each depth slice on its own: it is the 2-D pool over N * C * D planes,
// whose fast paths then apply. Its flat indices are the same either way.
absl::StatusOr<ConvGeometry> PoolGeometry(absl::string_view name, const PoolAttrs& a, ShapeSpan xs,
                                          int64_t* planes) {
  NDS_ASSIGN_OR_RETURN(ConvGeometry g, MakePoolGeometry(name, a, xs.subspan(2)));
  *planes = xs[0] * xs[1];
  if (!g.IsPlanar() && g.k_d == 1 && g.stride_d == 1 && g.pad_front == 0 && g.pad_back == 0) {
    *planes *= g.in_d;
    g.spatial_rank = 2;
    g.in_d = g.out_d = 1;
  }
  return g;
}

template <bool kMax>
absl::Status Pool(absl::string_view name, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const PoolAttrs& a) {
  int64_t planes = 0;
  NDS_ASSIGN_OR_RETURN(const ConvGeometry g, PoolGeometry(name, a, in[0].shape, &planes));
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  int64_t* indices = out.size() > 1 ? out[1].as<int64_t>() : nullptr;
  // About 16K window taps per chunk at least, so a chunk outweighs handing it over.
  const int64_t taps = std::max<int64_t>(1, g.out_plane() * g.k_plane());
  ParallelFor(planes, (int64_t{16} << 10) / taps, [&](int64_t first, int64_t end) {
    if (kMax && indices == nullptr && g.IsPlanar()) {
      MaxPoolRows(g, x, y, first, end);
    } else {
      PoolPlanes<kMax>(g, a, x, y, indices, first, end);
    }
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status MaxPool(const KernelContext& ctx, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const PoolAttrs& a = std::get<PoolAttrs>(attrs);
  // 3x3 windows without indices (resnet's stem) take the separable max of
  // max_pool3x3.cc, when the caller gives scratch for its lines.
  if (out.size() == 1 && ctx.scratch != nullptr) {
    int64_t planes = 0;
    NDS_ASSIGN_OR_RETURN(const ConvGeometry g, PoolGeometry("MaxPool", a, in[0].shape, &planes));
    if (MaxPool3x3Applies(g)) {
      return MaxPool3x3(ctx, g, planes, in[0].as<const float>(), out[0].as<float>());
    }
  }
  return Pool<true>("MaxPool", in, out, a);
}

absl::Status AveragePool(const KernelContext&, absl::Span<const TensorView> in,
                         absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Pool<false>("AveragePool", in, out, std::get<PoolAttrs>(attrs));
}

absl::Status GlobalAveragePool(const KernelContext&, absl::Span<const TensorView> in,
                               absl::Span<const TensorView> out, const OpAttrs&) {
  const int64_t planes = in[0].shape[0] * in[0].shape[1];
  const int64_t plane = planes == 0 ? 0 : in[0].numel() / planes;
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  // LaneSum's partial sums vectorize where one running sum cannot be reordered: the
  // squeeze-and-excitation pools of efficientnet_b0 took 1.6 ms per run summed one float
  // at a time, 10x ONNX Runtime's.
  ParallelFor(planes, PlanesPerChunk(plane), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      y[p] = LaneSum(x + p * plane, plane, [](float v) { return v; }) / static_cast<float>(plane);
    }
  });
  return absl::OkStatus();
}

absl::Status GlobalMaxPool(const KernelContext&, absl::Span<const TensorView> in,
                           absl::Span<const TensorView> out, const OpAttrs&) {
  const int64_t planes = in[0].shape[0] * in[0].shape[1];
  const int64_t plane = planes == 0 ? 0 : in[0].numel() / planes;
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  for (int64_t p = 0; p < planes; ++p) {
    float best = x[p * plane];
    for (int64_t i = 1; i < plane; ++i) best = std::max(best, x[p * plane + i]);
    y[p] = best;
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
