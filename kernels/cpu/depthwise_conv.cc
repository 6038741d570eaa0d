// Depthwise Conv on the CPU. Each input plane is first copied into a zero-bordered
// buffer split into `stride_w` column phases (phase q holds padded columns q, q + sw,
// q + 2 sw, ...), so that every tap of every output row reads one contiguous, in-bounds
// run of floats: no bounds test in the inner loop, and stride 2 is as vectorizable as
// stride 1. The copy is one pass over the plane; the taps then make kh * kw passes over
// it while it is in L1/L2. Output rows are summed 8 positions at a time in registers
// (all taps, then one store and the fused activation), not tap by tap through memory.
// On x86-64 the plane loop is also compiled for AVX2 and picked at run time.
#include "kernels/cpu/depthwise_conv.h"

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "base/status_macros.h"
#include "kernels/cpu/depthwise_conv_c16.h"
#include "kernels/cpu/depthwise_conv_kxk.h"
#include "kernels/cpu/depthwise_conv_in_plane.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {
namespace {

// Where the phases of one padded input plane live and how an output reads them.
struct PhasePlan {
  int64_t rows;    // padded rows: (out_h - 1) * sh + (kh - 1) * dh + 1
  int64_t width;   // floats per phase row: out_w + ((kw - 1) * dw) / sw
  int64_t phases;  // sw
  int64_t floats() const { return rows * width * phases; }
};

PhasePlan MakePhasePlan(const ConvGeometry& g) {
  return {(g.out_h - 1) * g.stride_h + (g.k_h - 1) * g.dil_h + 1,
          g.out_w + ((g.k_w - 1) * g.dil_w) / g.stride_w, g.stride_w};
}

// Eight floats as one value; GCC lowers it to the target's vectors (two SSE registers in
// the baseline build, one AVX register in the AVX2 one). aligned(4): loads and stores
// may start at any float.
typedef float F8 __attribute__((vector_size(32), aligned(4), may_alias));

// FillPhases for stride 2 (mobilenet's and efficientnet's downsampling convs): both
// phases in one pass over each image row, sixteen floats split into evens and odds at a
// time.
void FillTwoPhases(const ConvGeometry& g, const PhasePlan& pp, const float* x, float* buf) {
  // Image columns past this one fall beyond the phase rows (no output reads them).
  const int64_t cols = std::min(g.in_w, 2 * pp.width - g.pad_left);
  for (int64_t t = 0; t < pp.rows; ++t) {
    float* d[2] = {buf + t * pp.width, buf + (pp.rows + t) * pp.width};
    std::fill(d[0], d[0] + pp.width, 0.0f);
    std::fill(d[1], d[1] + pp.width, 0.0f);
    const int64_t ih = t - g.pad_top;
    if (ih < 0 || ih >= g.in_h) continue;
    const float* xr = x + ih * g.in_w;
    // Padded column pc = ic + pad_left goes to phase pc % 2 at pc / 2.
    int64_t ic = 0;
    if (g.pad_left % 2 != 0 && ic < cols) {
      d[1][g.pad_left / 2] = xr[0];
      ic = 1;
    }
    for (; ic + 16 <= cols; ic += 16) {
      typedef int I8 __attribute__((vector_size(32)));
      const F8 a = *reinterpret_cast<const F8*>(xr + ic);
      const F8 b = *reinterpret_cast<const F8*>(xr + ic + 8);
      const int64_t at = (ic + g.pad_left) / 2;
      *reinterpret_cast<F8*>(d[0] + at) = __builtin_shuffle(a, b, I8{0, 2, 4, 6, 8, 10, 12, 14});
      *reinterpret_cast<F8*>(d[1] + at) = __builtin_shuffle(a, b, I8{1, 3, 5, 7, 9, 11, 13, 15});
    }
    for (; ic < cols; ++ic) {
      const int64_t pc = ic + g.pad_left;
      d[pc % 2][pc / 2] = xr[ic];
    }
  }
}

// buf[q][t][j] = x[t - pad_top][j * sw + q - pad_left], or 0 outside the image.
void FillPhases(const ConvGeometry& g, const PhasePlan& pp, const float* x, float* buf) {
  if (pp.phases == 2) return FillTwoPhases(g, pp, x, buf);
  for (int64_t q = 0; q < pp.phases; ++q) {
    // Phase columns j whose image column j * sw + q - pl lies in [0, in_w).
    const int64_t off = q - g.pad_left;
    auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); };
    const int64_t lo = std::clamp<int64_t>(ceil_div(-off, pp.phases), 0, pp.width);
    const int64_t hi = std::clamp<int64_t>(ceil_div(g.in_w - off, pp.phases), lo, pp.width);
    for (int64_t t = 0; t < pp.rows; ++t) {
      float* d = buf + (q * pp.rows + t) * pp.width;
      const int64_t ih = t - g.pad_top;
      if (ih < 0 || ih >= g.in_h) {
        std::fill(d, d + pp.width, 0.0f);
        continue;
      }
      const float* xr = x + ih * g.in_w;
      std::fill(d, d + lo, 0.0f);
      if (pp.phases == 1) {
        std::copy(xr + lo + off, xr + hi + off, d + lo);
      } else {
        for (int64_t j = lo; j < hi; ++j) d[j] = xr[j * pp.phases + off];
      }
      std::fill(d + hi, d + pp.width, 0.0f);
    }
  }
}

// One output row: y[s] = act(b + sum over taps t of wt[t] * src[t][s]), s < len, with
// kTaps taps known at compile time (3x3, 5x5) or, for kTaps == 0, `taps` at run time.
template <int kTaps, typename Act>
[[gnu::always_inline]] inline void Row(const float* const* src, const float* wt, int taps, float b,
                                       int64_t len, Act act, float* __restrict y) {
  const int nt = kTaps > 0 ? kTaps : taps;
  int64_t s = 0;
  for (; s + 8 <= len; s += 8) {
    F8 acc = F8{} + b;
    for (int t = 0; t < nt; ++t) acc += wt[t] * *reinterpret_cast<const F8*>(src[t] + s);
    *reinterpret_cast<F8*>(y + s) = acc;
  }
  for (; s < len; ++s) {
    float acc = b;
    for (int t = 0; t < nt; ++t) acc += wt[t] * src[t][s];
    y[s] = acc;
  }
  for (s = 0; s < len; ++s) y[s] = act(y[s]);
}

// Outputs [m0, m1) of one input channel's phases `buf`: out planes of out_h x out_w.
template <int kTaps, typename Act>
[[gnu::always_inline]] inline void Planes(const ConvGeometry& g, const PhasePlan& pp,
                                          const float* buf, const float* w, const float* bias,
                                          int64_t m0, int64_t m1, Act act, float* y) {
  const int taps = static_cast<int>(g.k_plane());
  // Each tap's offset into the phases at output row 0; row r adds r * sh rows.
  absl::InlinedVector<int64_t, 25> base(taps);
  absl::InlinedVector<const float*, 25> src(taps);
  for (int64_t ki = 0; ki < g.k_h; ++ki) {
    for (int64_t kj = 0; kj < g.k_w; ++kj) {
      const int64_t col = kj * g.dil_w;
      base[ki * g.k_w + kj] =
          ((col % pp.phases) * pp.rows + ki * g.dil_h) * pp.width + col / pp.phases;
    }
  }
  for (int64_t m = m0; m < m1; ++m) {
    const float* wm = w + m * taps;
    const float b = bias != nullptr ? bias[m] : 0.0f;
    float* ym = y + m * g.out_plane();
    for (int64_t r = 0; r < g.out_h; ++r) {
      const int64_t row_off = r * g.stride_h * pp.width;
      for (int t = 0; t < taps; ++t) src[t] = buf + base[t] + row_off;
      Row<kTaps>(src.data(), wm, taps, b, g.out_w, act, ym + r * g.out_w);
    }
  }
}

template <typename Act>
[[gnu::always_inline]] inline void PlanesByTaps(const ConvGeometry& g, const PhasePlan& pp,
                                                const float* buf, const float* w, const float* bias,
                                                int64_t m0, int64_t m1, Act act, float* y) {
  switch (g.k_plane()) {
    case 9:
      return Planes<9>(g, pp, buf, w, bias, m0, m1, act, y);
    case 25:
      return Planes<25>(g, pp, buf, w, bias, m0, m1, act, y);
    default:
      return Planes<0>(g, pp, buf, w, bias, m0, m1, act, y);
  }
}

[[gnu::always_inline]] inline void PlanesAnyAct(const ConvGeometry& g, const PhasePlan& pp,
                                                const float* buf, const float* w, const float* bias,
                                                int64_t m0, int64_t m1, const ConvEpilogue& e,
                                                float* y) {
  switch (e.kind) {
    case ConvActivation::kNone:
      return PlanesByTaps(
          g, pp, buf, w, bias, m0, m1, [](float v) { return v; }, y);
    case ConvActivation::kRelu:
      return PlanesByTaps(g, pp, buf, w, bias, m0, m1, ReluOp(), y);
    case ConvActivation::kClip:
      return PlanesByTaps(g, pp, buf, w, bias, m0, m1, ClipOp{e.lo, e.hi}, y);
    case ConvActivation::kHardSwish:
      return PlanesByTaps(g, pp, buf, w, bias, m0, m1, HardSwishOp(), y);
    case ConvActivation::kSigmoid:
    case ConvActivation::kSilu:
      PlanesByTaps(
          g, pp, buf, w, bias, m0, m1, [](float v) { return v; }, y);
      LateActivationInPlace(e.kind, y + m0 * g.out_plane(), (m1 - m0) * g.out_plane());
      return;
  }
}

using PlanesFn = void (*)(const ConvGeometry&, const PhasePlan&, const float*, const float*,
                          const float*, int64_t, int64_t, const ConvEpilogue&, float*);

void PlanesBaseline(const ConvGeometry& g, const PhasePlan& pp, const float* buf, const float* w,
                    const float* bias, int64_t m0, int64_t m1, const ConvEpilogue& e, float* y) {
  PlanesAnyAct(g, pp, buf, w, bias, m0, m1, e, y);
}

#if defined(__x86_64__)
// The same loops with 8-float vectors; only called where the CPU has AVX2. No FMA: the
// results stay bit-identical to the baseline build's.
[[gnu::target("avx2")]] void PlanesAvx2(const ConvGeometry& g, const PhasePlan& pp,
                                        const float* buf, const float* w, const float* bias,
                                        int64_t m0, int64_t m1, const ConvEpilogue& e, float* y) {
  PlanesAnyAct(g, pp, buf, w, bias, m0, m1, e, y);
}

PlanesFn PickPlanes() { return __builtin_cpu_supports("avx2") ? PlanesAvx2 : PlanesBaseline; }
#else
PlanesFn PickPlanes() { return PlanesBaseline; }
#endif

}  // namespace

absl::Status DepthwiseConv(const KernelContext& ctx, const ConvGeometry& g, int64_t n, int64_t c,
                           int64_t mg, const float* x, const float* w, const float* bias,
                           const ConvEpilogue& act, float* y) {
  if (DepthwiseInPlaneChosen(g, mg, act)) return DepthwiseInPlane(g, n, c, x, w, bias, act, y);
  if (DepthwiseC16Chosen(g, mg, act)) return DepthwiseC16(ctx, g, n, c, x, w, bias, act, y);
  if (DepthwiseKxKApplies(g)) return DepthwiseKxK(ctx, g, n, c, mg, x, w, bias, act, y);
  static const PlanesFn planes_fn = PickPlanes();
  const PhasePlan pp = MakePhasePlan(g);
  const int64_t planes = n * c;
  // Blocks of input planes, one phase buffer each (reused plane after plane).
  const int64_t blocks = DepthwisePlaneBlocks(g, planes, mg);
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError("Conv: the kernel context has no scratch allocator");
  }
  NDS_ASSIGN_OR_RETURN(
      void* mem,
      ctx.scratch->Allocate(static_cast<std::size_t>(blocks * pp.floats()) * sizeof(float)));
  float* bufs = static_cast<float*>(mem);
  ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      float* buf = bufs + blk * pp.floats();
      for (int64_t pl = blk * planes / blocks; pl < (blk + 1) * planes / blocks; ++pl) {
        const int64_t i = pl / c, ci = pl % c;
        FillPhases(g, pp, x + pl * g.in_plane(), buf);
        // Outputs ci * mg .. of image i; weights and bias index the output channel.
        const int64_t m0 = ci * mg;
        planes_fn(g, pp, buf, w, bias, m0, m0 + mg, act, y + i * c * mg * g.out_plane());
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
