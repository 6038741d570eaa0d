// The 3x3 stride-2 depthwise Conv in the planes (depthwise_conv_s2.h). Output j of a
// sixteen-wide block reads input columns base + 2j, base + 2j + 1 and base + 2j + 2 of
// each of its three input rows (base: the block's first column, less the left padding).
// Two vector loads hold columns base .. base + 31; the evens and the odds of the pair are
// the first two taps' operands, and the evens moved down one lane with column base + 32
// in the last lane are the third's: three permutes per input row, no copy of the plane,
// no transpose. Columns outside the image (the padding, the row's end) load as zeros
// through masks, so no load reaches outside the row; rows outside the image are skipped.
// Output rows go in pairs, which share their middle input row, with two sum chains each.
#include "kernels/cpu/depthwise_conv_s2.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/avx512_lanes.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {
namespace {

constexpr int64_t kLanes = 16;
// A plane is at least this many multiply-adds per ParallelFor chunk (about 5 us).
constexpr int64_t kMinChunkMacs = int64_t{1} << 14;

#if defined(__x86_64__)

#define NDS_S2_INLINE NDS_AVX512_INLINE

using avx512::Act;
using avx512::Activate;
using avx512::FirstLanes;

// Columns [col, col + 16) of `row` (in_w floats), zeros past its end; col >= 0.
NDS_S2_INLINE __m512 LoadFrom(const float* row, int64_t col, int64_t in_w) {
  const int64_t count = in_w - col;
  if (count <= 0) return _mm512_setzero_ps();
  return _mm512_maskz_loadu_ps(FirstLanes(count), row + col);
}

// Columns [base, base + 16) with base in [-2, 0): the row's first sixteen moved up
// -base lanes behind zeros, so no address before the row is formed.
NDS_S2_INLINE __m512 LoadBeforeStart(const float* row, int64_t base, int64_t in_w) {
  const __m512i head = _mm512_castps_si512(LoadFrom(row, 0, in_w));
  const __m512i zero = _mm512_setzero_si512();
  // alignr(a, b, s) is lanes s .. s + 15 of b followed by a.
  return _mm512_castsi512_ps(base == -1 ? _mm512_alignr_epi32(head, zero, 15)
                                        : _mm512_alignr_epi32(head, zero, 14));
}

// The three operands of one input row for the sixteen outputs whose input columns start
// at `base` in `row`: columns base + 2j (e), base + 2j + 1 (o) and base + 2j + 2 (e2).
struct Split {
  __m512 e, o, e2;
};

NDS_S2_INLINE Split SplitRow(const float* row, int64_t base, int64_t in_w) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  // Lanes 1 .. 15 of the evens, then lane 0 of the second operand (column base + 32).
  const __m512i next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  const __m512 a = base >= 0 ? LoadFrom(row, base, in_w) : LoadBeforeStart(row, base, in_w);
  const __m512 b = LoadFrom(row, base + kLanes, in_w);
  const int64_t last = base + 2 * kLanes;
  const __m512 tail = _mm512_set1_ps(last < in_w ? row[last] : 0.0f);
  const __m512 e = _mm512_permutex2var_ps(a, even, b);
  return {e, _mm512_permutex2var_ps(a, odd, b), _mm512_permutex2var_ps(e, next, tail)};
}

// acc + one kernel row's three taps (weights w[0..3)) on a split input row.
NDS_S2_INLINE __m512 Taps(const Split& s, const __m512* w, __m512 acc) {
  acc = _mm512_fmadd_ps(w[0], s.e, acc);
  acc = _mm512_fmadd_ps(w[1], s.o, acc);
  return _mm512_fmadd_ps(w[2], s.e2, acc);
}

// One plane: x [in_h, in_w] to y [out_h, out_w] with its nine weights and bias.
template <Act kAct>
__attribute__((target("arch=x86-64-v4"))) void Plane(const ConvGeometry& g, const float* x,
                                                     const float* w9, float b, float lo_v,
                                                     float hi_v, float* y) {
  __m512 w[9];
  for (int t = 0; t < 9; ++t) w[t] = _mm512_set1_ps(w9[t]);
  const __m512 bias = _mm512_set1_ps(b), lo = _mm512_set1_ps(lo_v), hi = _mm512_set1_ps(hi_v);
  const __m512 zero = _mm512_setzero_ps();
  // Two output rows at a time: they read five input rows, the middle one with both, and
  // their four sum chains are independent (one row's chains alone wait on their latency).
  for (int64_t r = 0; r < g.out_h; r += 2) {
    const int64_t ih0 = 2 * r - g.pad_top;
    const bool second = r + 1 < g.out_h;
    const float* rows[5];
    for (int k = 0; k < 5; ++k) {
      const int64_t ih = ih0 + k;
      rows[k] = ih >= 0 && ih < g.in_h ? x + ih * g.in_w : nullptr;  // null: padding
    }
    if (!second) rows[3] = rows[4] = nullptr;
    float* yr = y + r * g.out_w;
    for (int64_t oc = 0; oc < g.out_w; oc += kLanes) {
      const int64_t base = 2 * oc - g.pad_left;
      // Row r: a1 (kernel rows 0 and 2) + a2 (row 1); row r + 1: b1 (rows 0 and 2) + b2.
      __m512 a1 = bias, a2 = zero, b1 = bias, b2 = zero;
      if (rows[0] != nullptr) a1 = Taps(SplitRow(rows[0], base, g.in_w), w, a1);
      if (rows[1] != nullptr) a2 = Taps(SplitRow(rows[1], base, g.in_w), w + 3, a2);
      if (rows[2] != nullptr) {
        const Split s = SplitRow(rows[2], base, g.in_w);
        a1 = Taps(s, w + 6, a1);
        b1 = Taps(s, w, b1);
      }
      if (rows[3] != nullptr) b2 = Taps(SplitRow(rows[3], base, g.in_w), w + 3, b2);
      if (rows[4] != nullptr) b1 = Taps(SplitRow(rows[4], base, g.in_w), w + 6, b1);
      const __mmask16 m = FirstLanes(g.out_w - oc);
      _mm512_mask_storeu_ps(yr + oc, m, Activate<kAct>(_mm512_add_ps(a1, a2), lo, hi));
      if (second) {
        _mm512_mask_storeu_ps(yr + g.out_w + oc, m, Activate<kAct>(_mm512_add_ps(b1, b2), lo, hi));
      }
    }
  }
}

void AnyPlane(const ConvGeometry& g, const ConvEpilogue& act, const float* x, const float* w9,
              float b, float* y) {
  switch (act.kind) {
    case ConvActivation::kRelu:
      return Plane<Act::kRelu>(g, x, w9, b, act.lo, act.hi, y);
    case ConvActivation::kClip:
      return Plane<Act::kClip>(g, x, w9, b, act.lo, act.hi, y);
    default:  // kNone, and the others (applied after: LateActivationInPlace)
      return Plane<Act::kNone>(g, x, w9, b, act.lo, act.hi, y);
  }
}

#else  // no AVX-512 build: DepthwiseS2Applies is false

void AnyPlane(const ConvGeometry&, const ConvEpilogue&, const float*, const float*, float, float*) {
}

#endif  // defined(__x86_64__)

}  // namespace

bool DepthwiseS2Applies(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act) {
  (void)act;  // every activation: Relu and Clip in registers, the others after
#if defined(__x86_64__)
  return PackedGemmUsesAvx512() && mg == 1 && g.k_h == 3 && g.k_w == 3 && g.stride_h == 2 &&
         g.stride_w == 2 && g.dil_h == 1 && g.dil_w == 1 && g.pad_top <= 2 && g.pad_left <= 2;
#else
  (void)g, (void)mg;
  return false;
#endif
}

bool DepthwiseS2Chosen(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act) {
  return DepthwiseS2Applies(g, mg, act) && g.out_w >= kDepthwiseS2MinOutW;
}

absl::Status DepthwiseS2(const ConvGeometry& g, int64_t n, int64_t c, const float* x,
                         const float* w, const float* bias, const ConvEpilogue& act, float* y) {
  if (!DepthwiseS2Applies(g, 1, act)) {
    return absl::FailedPreconditionError("Conv: the stride-2 depthwise loop does not apply");
  }
  const int64_t plane_macs = std::max<int64_t>(1, g.out_plane() * 9);
  ParallelFor(n * c, std::max<int64_t>(1, kMinChunkMacs / plane_macs), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t ci = p % c;
      float* yp = y + p * g.out_plane();
      AnyPlane(g, act, x + p * g.in_plane(), w + ci * 9, bias != nullptr ? bias[ci] : 0.0f, yp);
      LateActivationInPlace(act.kind, yp, g.out_plane());
    }
  });
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
