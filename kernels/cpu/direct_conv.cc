#include "kernels/cpu/direct_conv.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/conv_activation.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/cpu/micro_kernel_12x16.h"
#include "kernels/cpu/micro_kernel_6x16.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scratch_slots.h"

namespace ndserve::kernels::cpu {
namespace {

using micro::MicroKernel;

// Most A rows of one task: 16 panels, so a K block of them (96 KB) stays in L2 while
// the task's tiles pass, and the task's C buffer stays small.
constexpr int64_t kMaxTaskPanels = 16;
// Fewest A panels of a task that the split below makes narrower to have more tasks.
constexpr int64_t kMinTaskPanels = 4;
// Most floats of a task's C buffer (tiles x rows x 16): 48 KB.
constexpr int64_t kMaxTaskCFloats = 12 << 10;
// Most phase planes (stride_h * stride_w) of a conv the direct path takes.
constexpr int64_t kMaxPhases = 64;
// A conv under this many multiply-adds runs on the calling thread (as PackedGemm).
constexpr int64_t kMinParallelMacs = int64_t{1} << 19;

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }
// Rounds toward +infinity for any sign of a (b > 0).
int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// The padded image's layout and the wide output grid, per conv geometry.
struct Layout {
  int64_t hp, wp;        // padded image
  int64_t hph, wph;      // one phase plane (the padded image itself for stride 1)
  int64_t phases;        // phase planes any tap reads (of stride_h * stride_w)
  std::vector<int64_t> slot;  // per phase a * stride_w + b: its plane's index, or -1
  int64_t chan;          // floats per channel: all phases, rounded to an odd number of
                         // 64-byte lines so rows k a channel apart fall in different L1 sets
  int64_t image;         // floats per image: c * chan
  int64_t wide;          // columns of the wide grid: out_h * wph
  int64_t tiles;         // 16-wide tiles per image
  int64_t k;             // c * kh * kw
  int64_t xp_floats;     // all images plus the slack the last tile's reads run into
};

Layout MakeLayout(const ConvGeometry& g, int64_t n, int64_t c) {
  Layout l;
  l.hp = g.in_h + g.pad_top + g.pad_bottom;
  l.wp = g.in_w + g.pad_left + g.pad_right;
  l.hph = CeilDiv(l.hp, g.stride_h);
  l.wph = CeilDiv(l.wp, g.stride_w);
  // Only the phases some tap reads are copied: a strided 1x1 conv (resnet's downsample)
  // reads one of four.
  l.slot.assign(g.stride_h * g.stride_w, -1);
  for (int64_t ki = 0; ki < g.k_h; ++ki) {
    for (int64_t kj = 0; kj < g.k_w; ++kj) {
      l.slot[(ki * g.dil_h % g.stride_h) * g.stride_w + kj * g.dil_w % g.stride_w] = 0;
    }
  }
  l.phases = 0;
  for (int64_t& s : l.slot) {
    if (s == 0) s = l.phases++;
  }
  l.chan = RoundUp(l.phases * l.hph * l.wph, 16);
  if ((l.chan / 16) % 2 == 0) l.chan += 16;
  l.image = c * l.chan;
  l.wide = g.out_h * l.wph;
  l.tiles = CeilDiv(l.wide, kPackNr);
  l.k = c * g.k_plane();
  // The farthest read: the last image's last channel's farthest tap, from its last
  // tile's last column. Past the images it reads zeros.
  const int64_t far = (n - 1) * l.image + (c - 1) * l.chan + l.phases * l.hph * l.wph +
                      l.tiles * kPackNr;
  l.xp_floats = RoundUp(std::max(n * l.image, far), 16);
  return l;
}

// off[(ci * kh + ki) * kw + kj]: where row k of the im2col matrix starts in one image's Xp.
void FillOffsets(const ConvGeometry& g, const Layout& l, int64_t c, int32_t* off) {
  for (int64_t ci = 0; ci < c; ++ci) {
    for (int64_t ki = 0; ki < g.k_h; ++ki) {
      for (int64_t kj = 0; kj < g.k_w; ++kj) {
        const int64_t r = ki * g.dil_h, s = kj * g.dil_w;
        const int64_t phase = l.slot[(r % g.stride_h) * g.stride_w + s % g.stride_w];
        *off++ = static_cast<int32_t>(ci * l.chan + phase * l.hph * l.wph +
                                      (r / g.stride_h) * l.wph + s / g.stride_w);
      }
    }
  }
}

// Four floats (SSE: every x86-64 has it, and this runs outside the ISA clones).
typedef float F4 __attribute__((vector_size(16), aligned(4), may_alias));

// row[q] = src[2q] for q from lo while src's eight floats from 2q lie in its first
// `avail` floats (one row of the image); returns the first q it left. A stride-2 conv's
// phase planes one float at a time were an eighth of mobilenet_v2's stem.
int64_t GatherEvens(const float* src, int64_t lo, int64_t hi, int64_t avail, float* row) {
  int64_t q = lo;
  for (; q + 4 <= hi && 2 * q + 8 <= avail; q += 4) {
    const F4 a = *reinterpret_cast<const F4*>(src + 2 * q);
    const F4 b = *reinterpret_cast<const F4*>(src + 2 * q + 4);
    *reinterpret_cast<F4*>(row + q) = __builtin_shufflevector(a, b, 0, 2, 4, 6);
  }
  return q;
}

// One channel of one image into its phase planes, zeros where the padding is.
void PadChannel(const ConvGeometry& g, const Layout& l, const float* x, float* xp) {
  for (int64_t a = 0; a < g.stride_h; ++a) {
    for (int64_t b = 0; b < g.stride_w; ++b) {
      const int64_t phase = l.slot[a * g.stride_w + b];
      if (phase < 0) continue;
      float* plane = xp + phase * l.hph * l.wph;
      for (int64_t r = 0; r < l.hph; ++r) {
        float* row = plane + r * l.wph;
        const int64_t ih = r * g.stride_h + a - g.pad_top;
        if (ih < 0 || ih >= g.in_h) {
          std::fill(row, row + l.wph, 0.0f);
          continue;
        }
        const float* xr = x + ih * g.in_w;
        // Phase column q holds input column q * stride_w + shift when that is inside.
        const int64_t shift = b - g.pad_left;
        const int64_t lo = std::min(l.wph, std::max<int64_t>(0, CeilDiv(-shift, g.stride_w)));
        const int64_t hi = std::clamp(CeilDiv(g.in_w - shift, g.stride_w), lo, l.wph);
        std::fill(row, row + lo, 0.0f);
        if (g.stride_w == 1) {
          std::memcpy(row + lo, xr + lo + shift, (hi - lo) * sizeof(float));
        } else {
          const float* src = xr + shift;
          int64_t q = lo;
          if (g.stride_w == 2) q = GatherEvens(src, lo, hi, g.in_w - shift, row);
          for (; q < hi; ++q) row[q] = src[q * g.stride_w];
        }
        std::fill(row + hi, row + l.wph, 0.0f);
      }
    }
  }
  const int64_t used = l.phases * l.hph * l.wph;
  std::fill(xp + used, xp + l.chan, 0.0f);
}

struct Call {
  const ConvGeometry* g;
  const Layout* l;
  const PackedMatrix* w;
  const int32_t* off;
  const float* xp;
  const float* bias;
  int64_t m;
  float* y;
};

// One output row's piece: dst[j] = op(src[j] + b) for j < n. Relu, Clip and no
// activation eight at a time (the vector compares give the scalar functors' results,
// NaN included; there is no multiply an FMA could contract); the others lane by lane.
template <typename Op>
[[gnu::always_inline]] inline void PieceOut(const float* src, float b, int64_t n, float* dst,
                                            Op op) {
  using micro::At;
  using micro::V8;
  constexpr bool kVector = std::is_same_v<Op, IdentityOp> || std::is_same_v<Op, ReluOp> ||
                           std::is_same_v<Op, ClipOp>;
  if constexpr (kVector) {
    if (n >= 8) {
      const V8 bv = NDS_SPLAT(b);
      auto eight = [&](int64_t j) {
        V8 v = *At(src + j) + bv;
        if constexpr (std::is_same_v<Op, ReluOp>) micro::ReluV(v);
        if constexpr (std::is_same_v<Op, ClipOp>) {
          const V8 lo = NDS_SPLAT(op.lo), hi = NDS_SPLAT(op.hi);
          micro::ClipV(v, lo, hi);
        }
        *At(dst + j) = v;
      };
      int64_t j = 0;
      for (; j + 8 <= n; j += 8) eight(j);
      if (j < n) eight(n - 8);  // overlapping the eight before: the same values again
      return;
    }
  }
  if constexpr (std::is_same_v<Op, LateActivationOp>) {
    PieceOut(src, b, n, dst, IdentityOp());  // CopyOut applies it after, per channel
  } else {
    for (int64_t j = 0; j < n; ++j) dst[j] = op(src[j] + b);
  }
}

// The valid columns of a task's tiles from its C buffer into Y, with bias and `op`.
// Inlined into RunTask's clones. HardSwish, Sigmoid and SiLU are applied afterwards by
// the nodes' own loops (late_activation.h): the task's outputs of one channel and image
// are one run of Y, so one call each (per piece of at most 16 floats, the calls made
// efficientnet_b0's stem 3x slower).
template <typename Op>
[[gnu::always_inline]] inline void CopyOut(const Call& p, int64_t m0, int64_t m1, int64_t t0,
                                           int64_t t1, const float* cbuf, Op op) {
  const int64_t rows = RoundUp(m1 - m0, kPackMr), out_w = p.g->out_w, plane = p.g->out_plane();
  const int64_t wph = p.l->wph;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t img = t / p.l->tiles, n0 = (t % p.l->tiles) * kPackNr;
    const int64_t n1 = std::min(n0 + kPackNr, p.l->wide);
    const float* ct = cbuf + (t - t0) * rows * kPackNr;
    float* yi = p.y + img * p.m * plane;
    for (int64_t n = n0; n < n1;) {  // one output row's piece at a time
      const int64_t oh = n / wph, ow = n % wph;
      const int64_t len = std::min(n1 - n, wph - ow), valid = std::max<int64_t>(
                                                          0, std::min(len, out_w - ow));
      if (valid > 0) {
        for (int64_t r = m0; r < m1; ++r) {
          PieceOut(ct + (r - m0) * kPackNr + (n - n0), p.bias != nullptr ? p.bias[r] : 0.0f,
                   valid, yi + r * plane + oh * out_w + ow, op);
        }
      }
      n += len;
    }
  }
  if constexpr (std::is_same_v<Op, LateActivationOp>) {
    // Y offset of wide-grid position n: the valid outputs before it.
    const auto y_at = [&](int64_t n) { return n / wph * out_w + std::min(n % wph, out_w); };
    for (int64_t t = t0; t < t1;) {
      const int64_t img = t / p.l->tiles;
      const int64_t t_end = std::min(t1, (img + 1) * p.l->tiles);
      const int64_t from = y_at((t % p.l->tiles) * kPackNr);
      const int64_t to = y_at(std::min((t_end - 1) % p.l->tiles * kPackNr + kPackNr, p.l->wide));
      float* yi = p.y + img * p.m * plane;
      for (int64_t r = m0; r < m1 && to > from; ++r) {
        LateActivationInPlace(op.kind, yi + r * plane + from, to - from);
      }
      t = t_end;
    }
  }
}

// Rows [m0, m1) (on panel boundaries) x global tiles [t0, t1) over all of K, into cbuf
// (tile-major, each tile rows x 16), then into Y.
// kWide: two panels at a time by the AVX-512 kernel (micro_kernel_12x16.h) while two
// are left.
template <bool kWide>
__attribute__((always_inline)) inline void RunTaskBody(const Call& p, int64_t m0, int64_t m1,
                                                       int64_t t0, int64_t t1, float* cbuf,
                                                       const ConvEpilogue& act) {
  const int64_t rows = RoundUp(m1 - m0, kPackMr), k = p.l->k;
  for (int64_t k0 = 0; k0 < k; k0 += kPackKc) {
    const int64_t kb = std::min(kPackKc, k - k0);
    const int32_t* off = p.off + k0;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t img = t / p.l->tiles, n0 = (t % p.l->tiles) * kPackNr;
      const float* x = p.xp + img * p.l->image + n0;
      float* ct = cbuf + (t - t0) * rows * kPackNr;
      const auto brow = [&](int64_t r) { return x + off[r]; };
      for (int64_t i = m0; i < m1;) {
        const float* a = p.w->Panel(k0, kb, i);
        float* c = ct + (i - m0) * kPackNr;
        if (kWide && i + kPackMr < m1) {
          micro::MicroKernel12<micro::V16>(kb, a, a + kPackMr * kb, brow, c, kPackNr, k0 > 0);
          i += 2 * kPackMr;
        } else {
          MicroKernel(kb, a, brow, c, kPackNr, k0 > 0);
          i += kPackMr;
        }
      }
    }
  }
  switch (act.kind) {
    case ConvActivation::kNone:
      return CopyOut(p, m0, m1, t0, t1, cbuf, IdentityOp());
    case ConvActivation::kRelu:
      return CopyOut(p, m0, m1, t0, t1, cbuf, ReluOp());
    case ConvActivation::kClip:
      return CopyOut(p, m0, m1, t0, t1, cbuf, ClipOp{act.lo, act.hi});
    case ConvActivation::kHardSwish:
    case ConvActivation::kSigmoid:
    case ConvActivation::kSilu:
      return CopyOut(p, m0, m1, t0, t1, cbuf, LateActivationOp{act.kind});
  }
}

NDS_CPU_CLONES
void RunTask(const Call& p, int64_t m0, int64_t m1, int64_t t0, int64_t t1, float* cbuf,
             const ConvEpilogue& act) {
  RunTaskBody<false>(p, m0, m1, t0, t1, cbuf, act);
}

#if defined(__x86_64__)
__attribute__((target("arch=x86-64-v4"))) void RunTaskAvx512(const Call& p, int64_t m0,
                                                             int64_t m1, int64_t t0,
                                                             int64_t t1, float* cbuf,
                                                             const ConvEpilogue& act) {
  RunTaskBody<true>(p, m0, m1, t0, t1, cbuf, act);
}
#endif

// How a conv's work is cut into tasks: M blocks of `mb` rows x runs of `nt` tiles.
struct Split {
  int64_t mb, nt;
};

Split MakeSplit(int64_t m, int64_t all_tiles) {
  const int64_t panels = CeilDiv(m, kPackMr);
  int64_t parts = CeilDiv(panels, kMaxTaskPanels);
  int64_t mb = CeilDiv(panels, parts) * kPackMr;
  int64_t nt = std::clamp<int64_t>(kMaxTaskCFloats / (mb * kPackNr), 1, all_tiles);
  // Fewer tasks than four per thread: narrower M blocks first (down to kMinTaskPanels;
  // the image tiles they re-read are small and in L2), then shorter runs of tiles (each
  // run reads all of its M block's W again), so a thread slowed by other load hands work
  // on.
  const int threads = IntraOpThreads();
  const int64_t want = 4 * threads;
  if (threads > 1 && CeilDiv(all_tiles, nt) * parts < want) {
    parts = std::clamp<int64_t>(CeilDiv(want, CeilDiv(all_tiles, nt)), parts,
                                std::max<int64_t>(parts, panels / kMinTaskPanels));
    mb = CeilDiv(panels, parts) * kPackMr;
    parts = CeilDiv(panels * kPackMr, mb);
    if (CeilDiv(all_tiles, nt) * parts < want) {
      nt = std::max<int64_t>(1, all_tiles / CeilDiv(want, parts));
    }
  }
  return {mb, nt};
}

int64_t MaxCFloats(int64_t m, int64_t all_tiles) {
  const Split s = MakeSplit(m, all_tiles);
  return s.nt * s.mb * kPackNr;
}

}  // namespace

bool DirectConvSuits(const ConvGeometry& g, int64_t c) {
  // Strides past kMaxPhases would make one phase plane per output pixel or worse, and a
  // phase table that large; im2col handles them.
  if (!g.IsPlanar() || g.IsPointwise() || c <= 0 || g.stride_h * g.stride_w > kMaxPhases) {
    return false;
  }
  const Layout l = MakeLayout(g, 1, c);
  return l.xp_floats < INT_MAX;
}

int64_t DirectConvScratchFloats(const ConvGeometry& g, int64_t n, int64_t c, int64_t m) {
  const Layout l = MakeLayout(g, n, c);
  return RoundUp(l.k, 16) + l.xp_floats + ScratchSlots::Count() * MaxCFloats(m, n * l.tiles);
}

void DirectConv(const ConvGeometry& g, const PackedMatrix& w, int64_t n, int64_t c, int64_t m,
                const float* x, const float* bias, const ConvEpilogue& act, float* scratch,
                float* y) {
  const Layout l = MakeLayout(g, n, c);
  int32_t* off = reinterpret_cast<int32_t*>(scratch);
  float* xp = scratch + RoundUp(l.k, 16);
  float* cbufs = xp + l.xp_floats;
  FillOffsets(g, l, c, off);
  const int64_t in_plane = g.in_plane();
  ParallelFor(n * c, std::max<int64_t>(1, (int64_t{16} << 10) / l.chan), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) PadChannel(g, l, x + i * in_plane, xp + i * l.chan);
  });
  std::fill(xp + n * l.image, xp + l.xp_floats, 0.0f);

  const int64_t all_tiles = n * l.tiles;
  const Split s = MakeSplit(m, all_tiles);
  const int64_t m_tasks = CeilDiv(m, s.mb), t_tasks = CeilDiv(all_tiles, s.nt);
  const int64_t cbuf_floats = s.nt * s.mb * kPackNr;
  const Call p{&g, &l, &w, off, xp, bias, m, y};
  const int64_t task_macs = s.mb * s.nt * kPackNr * l.k;
  ScratchSlots slots;
  const bool wide = PackedGemmUsesAvx512();
  ParallelFor(m_tasks * t_tasks, CeilDiv(kMinParallelMacs, task_macs), [&](int64_t b, int64_t e) {
    const int slot = slots.Claim();
    for (int64_t t = b; t < e; ++t) {
      // M blocks inner: neighbouring tasks read the same image lines.
      const int64_t m0 = (t % m_tasks) * s.mb, t0 = (t / m_tasks) * s.nt;
      float* cbuf = cbufs + slot * cbuf_floats;
      const int64_t m1 = std::min(m, m0 + s.mb), t1 = std::min(all_tiles, t0 + s.nt);
#if defined(__x86_64__)
      if (wide) {
        RunTaskAvx512(p, m0, m1, t0, t1, cbuf, act);
        continue;
      }
#endif
      RunTask(p, m0, m1, t0, t1, cbuf, act);
    }
    slots.Release(slot);
  });
}

}  // namespace ndserve::kernels::cpu
