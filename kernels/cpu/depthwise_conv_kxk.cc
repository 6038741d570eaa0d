// The KxK depthwise Conv, K = 3 or 5 (depthwise_conv_kxk.h). Two loops; both sum eight
// outputs at a time over the K * K taps with the weights, the bias and the fused Relu /
// Clip in registers, and store each eight once. K is a template parameter so that every
// tap's offset and weight is a constant; K = 3 keeps its own hand-ordered sum.
//
// - Rows (stride 2 with out_w >= 8, stride 1 with out_w >= 32, and planes too big for
//   the flat buffer): each input row the window reaches is copied once into a ring of
//   padded lines (split into even and odd columns at stride 2), two output rows ahead of
//   its first reader (RingSlots), so every tap reads an in-bounds, contiguous run with no
//   bounds test and no plane-sized copy; rows in the padding read a shared zero line. A
//   row's partial last vector is the eight outputs ending at the row's end, overlapping
//   the vector before it.
// - Flat (out_w < 8, or < 32 at stride 1: the 7x7, 14x14 and 28x28 planes): the padded
//   plane is copied into a small buffer (one of two: the next plane's copy is made before
//   this one's sums), split into stride x stride phases so that consecutive outputs read
//   consecutive floats, and outputs are summed in buffer order across row boundaries: a
//   7x7 plane at stride 1 is 8 vectors instead of 49 scalar sums. The padding columns
//   between rows are computed too and dropped when the rows are copied out. Only the
//   image's interior is rewritten per plane: the padding stays zero.
//
// Per-plane set-up is a few pointers, and a task takes a block of planes, so the 960
// 7x7 planes of mobilenet_v2's last stage are eight tasks, not 960.
#include "kernels/cpu/depthwise_conv_kxk.h"

#include <algorithm>
#include <array>

#include "base/status_macros.h"
#include "kernels/conv_activation.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {
namespace {

// Eight floats as one value (one AVX register in the x86-64-v3 clone, two SSE ones in the
// baseline); aligned(4): loads and stores may start at any float.
typedef float F8 __attribute__((vector_size(32), aligned(4), may_alias));
// Four floats (SSE, in every clone): rows of 4 to 7 floats as two overlapping quarters.
typedef float F4 __attribute__((vector_size(16), aligned(4), may_alias));

// Floats past a line or a phase plane that a partial vector may read (all zero).
constexpr int64_t kSlack = 8;
// The flat loop's buffer per task at most: 7x7 needs a few hundred floats; a tall narrow
// plane that would need more takes the row loop.
constexpr int64_t kFlatMaxFloats = int64_t{16} << 10;
// At stride 1, rows narrower than this take the flat loop too: a 14- or 28-wide row is two
// or four vectors in the row loop, which then spends as much on each row's set-up (its
// ring slot, its taps' pointers) as on its sums; flat, the plane is one run of vectors
// (28 x 30 floats: 105 vectors, not 28 x 4), copied out row by row after. Measured
// (benchmarks/depthwise_benchmark.cc, one thread): 384 planes of 14x14 86 -> 72 us,
// 192 of 28x28 129 -> 115 us; at stride 2 the flat loop was slower (150 -> 245 us for
// 144 planes of 56x56), so those keep the rows.
constexpr int64_t kFlatMaxOutW = 32;

// Vector loads, stores and broadcasts as expressions: helper functions taking or returning
// F8 by value would change the baseline clone's ABI (GCC's -Wpsabi).
#define NDS_DW_LOAD(p) (*reinterpret_cast<const F8*>(p))
#define NDS_DW_STORE(p, v) (*reinterpret_cast<F8*>(p) = (v))
#define NDS_DW_LOAD4(p) (*reinterpret_cast<const F4*>(p))
#define NDS_DW_STORE4(p, v) (*reinterpret_cast<F4*>(p) = (v))
// v in every lane. (F8{} + v would add 0.0f first: a scalar add before each broadcast,
// and -0.0f would become +0.0f.)
#define NDS_DW_SPLAT(v) (F8{(v), (v), (v), (v), (v), (v), (v), (v)})

// n floats from `from` to `to` with no call: eights, the last eight overlapping the one
// before; 4 to 7 as two overlapping quarters; fewer one by one. (A plain loop here
// becomes a memmove call, a tenth of the 7x7 planes' time.)
[[gnu::always_inline]] inline void CopyRun(const float* __restrict from, int64_t n,
                                           float* __restrict to) {
  if (n >= 8) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) NDS_DW_STORE(to + i, NDS_DW_LOAD(from + i));
    if (i < n) NDS_DW_STORE(to + n - 8, NDS_DW_LOAD(from + n - 8));
    return;
  }
  if (n >= 4) {
    NDS_DW_STORE4(to, NDS_DW_LOAD4(from));
    NDS_DW_STORE4(to + n - 4, NDS_DW_LOAD4(from + n - 4));
    return;
  }
  for (int64_t i = 0; i < n; ++i) to[i] = from[i];
}

// The fused activation on eight sums, in place: Relu and Clip as vector selects (the same
// comparisons as ReluOp / ClipOp, so NaN passes through alike), the others lane by lane.
template <typename Act>
[[gnu::always_inline]] inline void Activate(F8& v, Act act) {
  for (int i = 0; i < 8; ++i) v[i] = act(v[i]);
}
[[gnu::always_inline]] inline void Activate(F8&, IdentityOp) {}
[[gnu::always_inline]] inline void Activate(F8& v, ReluOp) {
  const F8 zero{};
  v = v < zero ? zero : v;
}
[[gnu::always_inline]] inline void Activate(F8& v, ClipOp c) {
  const F8 lo = NDS_DW_SPLAT(c.lo), hi = NDS_DW_SPLAT(c.hi);
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
}

// y[0 .. 8) = act(b + sum over taps t of w[t] * src[t][at .. at + 8)), one partial sum
// per kernel row so the K * K multiply-adds are K short chains, not one long one.
template <int kK, typename Act>
[[gnu::always_inline]] inline void SumKxK(const float* const* src, int64_t at, const F8* w,
                                          const F8& b, Act act, float* y) {
  static_assert(kK == 3 || kK == 5);
  F8 v;
  if constexpr (kK == 3) {
    F8 r0 = b + w[0] * NDS_DW_LOAD(src[0] + at);
    F8 r1 = w[3] * NDS_DW_LOAD(src[3] + at);
    F8 r2 = w[6] * NDS_DW_LOAD(src[6] + at);
    r0 += w[1] * NDS_DW_LOAD(src[1] + at);
    r1 += w[4] * NDS_DW_LOAD(src[4] + at);
    r2 += w[7] * NDS_DW_LOAD(src[7] + at);
    r0 += w[2] * NDS_DW_LOAD(src[2] + at);
    r1 += w[5] * NDS_DW_LOAD(src[5] + at);
    r2 += w[8] * NDS_DW_LOAD(src[8] + at);
    v = r0 + r1 + r2;
  } else {
    F8 r[kK];
    r[0] = b + w[0] * NDS_DW_LOAD(src[0] + at);
    for (int ki = 1; ki < kK; ++ki) r[ki] = w[ki * kK] * NDS_DW_LOAD(src[ki * kK] + at);
    for (int kj = 1; kj < kK; ++kj) {
      for (int ki = 0; ki < kK; ++ki) {
        r[ki] += w[ki * kK + kj] * NDS_DW_LOAD(src[ki * kK + kj] + at);
      }
    }
    // Pairwise, so the chains' ends join in a short tree.
    v = ((r[0] + r[1]) + (r[2] + r[3])) + r[4];
  }
  Activate(v, act);
  NDS_DW_STORE(y, v);
}

// Where one input plane's copies live and which image columns each phase holds.
struct Plan {
  int64_t k;      // the window, both axes: 3 or 5
  int64_t s;      // the stride, both axes: 1 or 2
  int64_t width;  // floats per phase row: the padded columns the outputs read, / s
  // Image columns [0, cols) land in the phases (padded column ic + pad_left goes to phase
  // (ic + pad_left) % s at (ic + pad_left) / s); the others are never read. The rest of a
  // phase row is padding (zero).
  int64_t pad_left, cols;
  bool flat;
  int64_t plane_floats;  // flat: one phase plane, with room for the last vector's reads
  int64_t block_floats;  // one task's working space
};

// Ring slots of the row loop: the K rows a window reads plus the rows of the next
// kLookahead output rows, which are copied ahead. A vector load that straddles two vector
// stores still in flight cannot be forwarded from them and waits for both to retire: read
// right after its copy, the newest row's taps stalled on that (29 % of the loop's time in
// a perf profile of mobilenet_v2), and a row copied one or two output rows earlier has
// long retired.
constexpr int kLookahead = 2;
constexpr int RingSlots(int64_t k, int64_t s) { return static_cast<int>(k + kLookahead * s); }

Plan MakePlan(const ConvGeometry& g) {
  Plan p{};
  p.k = g.k_w;
  p.s = g.stride_w;
  p.width = ((g.out_w - 1) * p.s + p.k + p.s - 1) / p.s;
  p.pad_left = g.pad_left;
  p.cols = std::clamp<int64_t>(p.s * p.width - g.pad_left, 0, g.in_w);
  // Flat outputs run to out_h * width rounded up to a vector; the taps read up to K - 1
  // phase rows and columns further.
  p.plane_floats = (g.out_h + p.k) * p.width + 2 * kSlack;
  // Two copies of the phases (FlatPlanes copies the next plane while it sums this one),
  // then the flat outputs.
  const int64_t flat_floats = 2 * p.s * p.s * p.plane_floats + (g.out_h * p.width + 7) / 8 * 8;
  p.flat = (g.out_w < 8 || (p.s == 1 && g.out_w < kFlatMaxOutW)) && flat_floats <= kFlatMaxFloats;
  p.block_floats = p.flat ? flat_floats : RingSlots(p.k, p.s) * p.s * (p.width + kSlack);
  return p;
}

struct Args {
  ConvGeometry g;
  int64_t c, mg;
  const float* x;
  const float* w;
  const float* bias;
  ConvEpilogue act;
  const float* zero;  // a zero line: rows in the padding
  float* y;
};

// Image row xr into its phase rows d[0 .. kS) (whose padding columns are already zero):
// at stride 2, sixteen floats at a time split into evens and odds with two shuffles.
template <int kS>
[[gnu::always_inline]] inline void CopyRow(const Plan& p, const float* __restrict xr,
                                           float* const* d) {
  const int64_t pl = p.pad_left, cols = p.cols;
  if constexpr (kS == 1) {
    CopyRun(xr, cols, d[0] + pl);
  } else {
    int64_t ic = 0;
    // From here on ic + pl is even: ic goes to phase 0 and ic + 1 to phase 1, both at
    // (ic + pl) / 2.
    if (pl % 2 != 0 && cols > 0) {
      d[1][pl / 2] = xr[0];
      ic = 1;
    }
    typedef int I8 __attribute__((vector_size(32)));
    auto split16 = [&](int64_t at_ic) {
      const F8 a = NDS_DW_LOAD(xr + at_ic), b = NDS_DW_LOAD(xr + at_ic + 8);
      const int64_t at = (at_ic + pl) / 2;
      NDS_DW_STORE(d[0] + at, __builtin_shuffle(a, b, I8{0, 2, 4, 6, 8, 10, 12, 14}));
      NDS_DW_STORE(d[1] + at, __builtin_shuffle(a, b, I8{1, 3, 5, 7, 9, 11, 13, 15}));
    };
    // Eight floats into four evens and four odds: the 14-wide rows of a 7x7 output.
    auto split8 = [&](int64_t at_ic) {
      const F8 a = NDS_DW_LOAD(xr + at_ic);
      const int64_t at = (at_ic + pl) / 2;
      NDS_DW_STORE4(d[0] + at, __builtin_shufflevector(a, a, 0, 2, 4, 6));
      NDS_DW_STORE4(d[1] + at, __builtin_shufflevector(a, a, 1, 3, 5, 7));
    };
    for (; ic + 16 <= cols; ic += 16) split16(ic);
    // The rest as the sixteen floats (of even ic + pl) ending at or one before the row's
    // end, again where they overlap; a short row as eights the same way; then at most
    // one column.
    const int64_t last = cols >= 16 ? cols - 16 - (cols - 16 + pl) % 2 : -1;
    if (ic < cols && last >= 0) {
      split16(last);
      ic = std::max(ic, last + 16);
    }
    for (; ic + 8 <= cols; ic += 8) split8(ic);
    const int64_t last8 = cols >= 8 ? cols - 8 - (cols - 8 + pl) % 2 : -1;
    if (ic < cols && last8 >= 0) {
      split8(last8);
      ic = std::max(ic, last8 + 8);
    }
    for (; ic < cols; ++ic) d[(ic + pl) % 2][(ic + pl) / 2] = xr[ic];
  }
}

// Weights and bias of output channel m as vectors.
template <int kK>
[[gnu::always_inline]] inline void Weights(const Args& a, int64_t m, F8* w, F8* b) {
  for (int t = 0; t < kK * kK; ++t) w[t] = NDS_DW_SPLAT(a.w[m * kK * kK + t]);
  *b = NDS_DW_SPLAT(a.bias != nullptr ? a.bias[m] : 0.0f);
}

// One output row of len floats from the K * K taps' sources.
template <int kK, typename Act>
[[gnu::always_inline]] inline void OutRow(const float* const* src, const F8* w, const F8& b,
                                          int64_t len, Act act, float* y) {
  if (len >= 8) {
    int64_t s = 0;
    for (; s + 8 <= len; s += 8) SumKxK<kK>(src, s, w, b, act, y + s);
    if (s < len) SumKxK<kK>(src, len - 8, w, b, act, y + len - 8);
  } else {
    float v[8];
    SumKxK<kK>(src, 0, w, b, act, v);
    for (int64_t i = 0; i < len; ++i) y[i] = v[i];
  }
}

// (first + i) % kR for first, i < kR: the ring slot of a window's row i, without a
// division.
template <int kR>
constexpr std::array<int, 2 * kR - 1> SlotAfter() {
  std::array<int, 2 * kR - 1> t{};
  for (int i = 0; i < 2 * kR - 1; ++i) t[i] = i % kR;
  return t;
}

// Input planes [pl0, pl1) through the ring of K padded lines in `lines`.
template <int kK, int kS, typename Act>
[[gnu::always_inline]] inline void RowPlanes(const Args& a, const Plan& p, int64_t pl0, int64_t pl1,
                                             float* lines, Act act) {
  const ConvGeometry& g = a.g;
  constexpr int kR = RingSlots(kK, kS);
  const int64_t stride = p.width + kSlack;
  for (int64_t pl = pl0; pl < pl1; ++pl) {
    const float* xp = a.x + pl * g.in_plane();
    const int64_t ci = pl % a.c;
    float* yp = a.y + pl * a.mg * g.out_plane();
    const float* row[kR][kS];  // padded row t's phases sit in slot t % kR
    int64_t next = 0;          // the next padded row to copy
    F8 w0[kK * kK], b0;        // the first output channel's, once per plane
    Weights<kK>(a, ci * a.mg, w0, &b0);
    for (int64_t r = 0; r < g.out_h; ++r) {
      // Rows past the image's bottom padding are never read; copying them as padding
      // (the zero line) keeps the loop free of a bound.
      for (; next <= (r + kLookahead) * kS + kK - 1; ++next) {
        const int64_t slot = next % kR, ih = next - g.pad_top;
        const bool pad = ih < 0 || ih >= g.in_h;
        float* d[kS];
        for (int q = 0; q < kS; ++q) {
          d[q] = lines + (slot * kS + q) * stride;
          row[slot][q] = pad ? a.zero : d[q];
        }
        if (!pad) CopyRow<kS>(p, xp + ih * g.in_w, d);
      }
      const float* src[kK * kK];
      static constexpr std::array<int, 2 * kR - 1> kSlotAfter = SlotAfter<kR>();
      const int first = static_cast<int>((r * kS) % kR);
      for (int ki = 0; ki < kK; ++ki) {
        for (int kj = 0; kj < kK; ++kj) {
          src[ki * kK + kj] = row[kSlotAfter[first + ki]][kj % kS] + kj / kS;
        }
      }
      OutRow<kK>(src, w0, b0, g.out_w, act, yp + r * g.out_w);
      for (int64_t j = 1; j < a.mg; ++j) {
        F8 w[kK * kK], b;
        Weights<kK>(a, ci * a.mg + j, w, &b);
        OutRow<kK>(src, w, b, g.out_w, act, yp + j * g.out_plane() + r * g.out_w);
      }
    }
  }
}

// Input planes [pl0, pl1) through padded copies of the plane in `buf`: two sets of
// phases, then the flat outputs. Plane pl + 1 is copied into the other set before plane
// pl is summed, so the sums never read a copy whose stores are still in flight (a vector
// load over several scalar stores is not forwarded from them: it waits for them to retire,
// as in RowPlanes).
template <int kK, int kS, typename Act>
[[gnu::always_inline]] inline void FlatPlanes(const Args& a, const Plan& p, int64_t pl0,
                                              int64_t pl1, float* buf, Act act) {
  const ConvGeometry& g = a.g;
  const int64_t width = p.width, pf = p.plane_floats;
  const int64_t flat = g.out_h * width, padded_rows = (g.out_h - 1) * kS + kK;
  const int64_t set = kS * kS * pf;  // one copy's phases
  float* out = buf + 2 * set;
  // Tap (ki, kj) of flat output o = r * width + s reads padded row r * kS + ki, column
  // s * kS + kj: phase (ki % kS, kj % kS) at o + (ki / kS) * width + kj / kS (in the
  // first set; the second is `set` floats further).
  const float* src[kK * kK];
  for (int ki = 0; ki < kK; ++ki) {
    for (int kj = 0; kj < kK; ++kj) {
      src[ki * kK + kj] = buf + ((ki % kS) * kS + kj % kS) * pf + (ki / kS) * width + kj / kS;
    }
  }
  // Only the image's interior is written: the padding of both sets stays zero.
  const auto copy_plane = [&](int64_t pl, float* phases) {
    const float* xp = a.x + pl * g.in_plane();
    for (int64_t t = 0; t < padded_rows; ++t) {
      const int64_t ih = t - g.pad_top;
      if (ih < 0 || ih >= g.in_h) continue;
      float* d[kS];
      for (int q = 0; q < kS; ++q) d[q] = phases + ((t % kS) * kS + q) * pf + (t / kS) * width;
      CopyRow<kS>(p, xp + ih * g.in_w, d);
    }
  };
  if (pl0 < pl1) copy_plane(pl0, buf);
  for (int64_t pl = pl0; pl < pl1; ++pl) {
    const int64_t cur = ((pl - pl0) & 1) * set;
    if (pl + 1 < pl1) copy_plane(pl + 1, buf + (set - cur));
    const int64_t ci = pl % a.c;
    float* yp = a.y + pl * a.mg * g.out_plane();
    for (int64_t j = 0; j < a.mg; ++j) {
      F8 w[kK * kK], b;
      Weights<kK>(a, ci * a.mg + j, w, &b);
      for (int64_t o = 0; o < flat; o += 8) SumKxK<kK>(src, cur + o, w, b, act, out + o);
      float* ym = yp + j * g.out_plane();
      for (int64_t r = 0; r < g.out_h; ++r) CopyRun(out + r * width, g.out_w, ym + r * g.out_w);
    }
  }
}

template <int kK, typename Act>
[[gnu::always_inline]] inline void PlanesK(const Args& a, const Plan& p, int64_t pl0, int64_t pl1,
                                           float* buf, Act act) {
  if (p.s == 1) {
    return p.flat ? FlatPlanes<kK, 1>(a, p, pl0, pl1, buf, act)
                  : RowPlanes<kK, 1>(a, p, pl0, pl1, buf, act);
  }
  return p.flat ? FlatPlanes<kK, 2>(a, p, pl0, pl1, buf, act)
                : RowPlanes<kK, 2>(a, p, pl0, pl1, buf, act);
}

template <typename Act>
[[gnu::always_inline]] inline void PlanesAct(const Args& a, const Plan& p, int64_t pl0, int64_t pl1,
                                             float* buf, Act act) {
  if (p.k == 3) return PlanesK<3>(a, p, pl0, pl1, buf, act);
  return PlanesK<5>(a, p, pl0, pl1, buf, act);
}

// One task's planes [pl0, pl1) (plane pl = image pl / c, channel pl % c), with `buf`
// (p.block_floats) as its working space.
NDS_CPU_CLONES_V4 void Planes(
    const Args& a, const Plan& p, int64_t pl0, int64_t pl1, float* buf) {
  std::fill(buf, buf + p.block_floats, 0.0f);
  switch (a.act.kind) {
    case ConvActivation::kNone:
      return PlanesAct(a, p, pl0, pl1, buf, IdentityOp());
    case ConvActivation::kRelu:
      return PlanesAct(a, p, pl0, pl1, buf, ReluOp());
    case ConvActivation::kClip:
      return PlanesAct(a, p, pl0, pl1, buf, ClipOp{a.act.lo, a.act.hi});
    case ConvActivation::kHardSwish:  // LateActivationInPlace's
    case ConvActivation::kSigmoid:
    case ConvActivation::kSilu:
      return PlanesAct(a, p, pl0, pl1, buf, IdentityOp());
  }
}

}  // namespace

int64_t DepthwisePlaneBlocks(const ConvGeometry& g, int64_t planes, int64_t mg) {
  const int64_t per_plane = std::max<int64_t>(1, mg * g.out_plane() * g.k_plane());
  const int64_t min_planes = std::max<int64_t>(1, (int64_t{16} << 10) / per_plane);
  return std::clamp<int64_t>(planes / min_planes, 1, std::int64_t{4} * IntraOpThreads());
}

bool DepthwiseKxKApplies(const ConvGeometry& g) {
  return g.k_h == g.k_w && (g.k_w == 3 || g.k_w == 5) && g.dil_h == 1 && g.dil_w == 1 &&
         g.stride_h == g.stride_w && (g.stride_w == 1 || g.stride_w == 2);
}

absl::Status DepthwiseKxK(const KernelContext& ctx, const ConvGeometry& g, int64_t n, int64_t c,
                          int64_t mg, const float* x, const float* w, const float* bias,
                          const ConvEpilogue& act, float* y) {
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError("Conv: the kernel context has no scratch allocator");
  }
  const Plan p = MakePlan(g);
  const int64_t planes = n * c;
  const int64_t blocks = DepthwisePlaneBlocks(g, planes, mg);
  const int64_t zero_floats = p.width + kSlack;
  NDS_ASSIGN_OR_RETURN(
      void* mem,
      ctx.scratch->Allocate(static_cast<std::size_t>(zero_floats + blocks * p.block_floats) *
                            sizeof(float)));
  float* zero = static_cast<float*>(mem);
  std::fill(zero, zero + zero_floats, 0.0f);
  const Args args{g, c, mg, x, w, bias, act, zero, y};
  float* bufs = zero + zero_floats;
  ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t pl0 = blk * planes / blocks, pl1 = (blk + 1) * planes / blocks;
      Planes(args, p, pl0, pl1, bufs + blk * p.block_floats);
      const int64_t per = mg * g.out_plane();
      LateActivationInPlace(act.kind, y + pl0 * per, (pl1 - pl0) * per);
    }
  });
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
