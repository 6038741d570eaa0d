// The 3x3 depthwise Conv in the planes (depthwise_conv_in_plane.h). Output j of a
// sixteen-wide block reads input columns base + s j, base + s j + 1 and base + s j + 2 of
// each of its three input rows (s: the stride; base: the block's first column times s,
// less the left padding). Two vector loads hold columns base .. base + 31, and the three
// taps' operands come from them in registers:
// - stride 1: the first vector, and the pair shifted down by one and by two lanes
//   (valignd);
// - stride 2: the pair's evens and odds, and the evens moved down one lane with column
//   base + 32 in the last lane (vpermt2ps).
// No copy of the plane, no transpose. Columns outside the image (the padding, the row's
// end) load as zeros through masks, so no load reaches outside its row; rows outside the
// image are skipped. Output rows go in pairs, which share the input rows they both read,
// with two sum chains each: one row's chains alone would wait on their latency.
#include "kernels/cpu/depthwise_conv_in_plane.h"

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
// A ParallelFor chunk of planes holds at least this many multiply-adds (about a
// microsecond here); ParallelFor makes at most four chunks per thread anyway.
constexpr int64_t kMinChunkMacs = int64_t{1} << 14;

#if defined(__x86_64__)

using avx512::Act;
using avx512::Activate;
using avx512::FirstLanes;

// Columns [col, col + 16) of `row` (in_w floats), zeros past its end; col >= 0.
NDS_AVX512_INLINE __m512 LoadFrom(const float* row, int64_t col, int64_t in_w) {
  const int64_t count = in_w - col;
  if (count <= 0) return _mm512_setzero_ps();
  return _mm512_maskz_loadu_ps(FirstLanes(count), row + col);
}

// Columns [col, col + 16) for col >= -2: before the row's start, its first sixteen moved
// up -col lanes behind zeros, so no address before the row is formed.
NDS_AVX512_INLINE __m512 LoadAt(const float* row, int64_t col, int64_t in_w) {
  if (col >= 0) return LoadFrom(row, col, in_w);
  const __m512i head = _mm512_castps_si512(LoadFrom(row, 0, in_w));
  const __m512i zero = _mm512_setzero_si512();
  // alignr(a, b, s) is lanes s .. s + 15 of b followed by a.
  return _mm512_castsi512_ps(col == -1 ? _mm512_alignr_epi32(head, zero, 15)
                                       : _mm512_alignr_epi32(head, zero, 14));
}

// The three taps' operands of one input row for a block of sixteen outputs.
struct Operands {
  __m512 t0, t1, t2;
};

template <int kS>
NDS_AVX512_INLINE Operands RowOperands(const float* row, int64_t base, int64_t in_w) {
  const __m512 a = LoadAt(row, base, in_w), b = LoadFrom(row, base + kLanes, in_w);
  if constexpr (kS == 1) {
    const __m512i ai = _mm512_castps_si512(a), bi = _mm512_castps_si512(b);
    return {a, _mm512_castsi512_ps(_mm512_alignr_epi32(bi, ai, 1)),
            _mm512_castsi512_ps(_mm512_alignr_epi32(bi, ai, 2))};
  } else {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    // Lanes 1 .. 15 of the evens, then lane 0 of the second operand (column base + 32).
    const __m512i next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    const int64_t last = base + 2 * kLanes;
    const __m512 tail = _mm512_set1_ps(last < in_w ? row[last] : 0.0f);
    const __m512 e = _mm512_permutex2var_ps(a, even, b);
    return {e, _mm512_permutex2var_ps(a, odd, b), _mm512_permutex2var_ps(e, next, tail)};
  }
}

// acc + one kernel row's three taps (weights w[0..3)).
NDS_AVX512_INLINE __m512 Taps(const Operands& s, const __m512* w, __m512 acc) {
  acc = _mm512_fmadd_ps(w[0], s.t0, acc);
  acc = _mm512_fmadd_ps(w[1], s.t1, acc);
  return _mm512_fmadd_ps(w[2], s.t2, acc);
}

// One plane: x [in_h, in_w] to y [out_h, out_w] with its nine weights and bias. Output
// rows r and r + 1 read input rows ih0 .. ih0 + kS + 2: r the first three (kernel rows
// 0, 1, 2), r + 1 the three from kS on.
template <int kS, Act kAct>
__attribute__((target("arch=x86-64-v4"))) void Plane(const ConvGeometry& g, const float* x,
                                                     const float* w9, float b, float lo_v,
                                                     float hi_v, float* y) {
  constexpr int kRows = kS + 3;
  __m512 w[9];
  for (int t = 0; t < 9; ++t) w[t] = _mm512_set1_ps(w9[t]);
  const __m512 bias = _mm512_set1_ps(b), lo = _mm512_set1_ps(lo_v), hi = _mm512_set1_ps(hi_v);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t r = 0; r < g.out_h; r += 2) {
    const int64_t ih0 = kS * r - g.pad_top;
    const bool second = r + 1 < g.out_h;
    const float* rows[kRows];  // null: a padding row, or one only the missing row r + 1 reads
    for (int k = 0; k < kRows; ++k) {
      const int64_t ih = ih0 + k;
      rows[k] = ih >= 0 && ih < g.in_h && (k < 3 || second) ? x + ih * g.in_w : nullptr;
    }
    float* yr = y + r * g.out_w;
    for (int64_t oc = 0; oc < g.out_w; oc += kLanes) {
      const int64_t base = kS * oc - g.pad_left;
      // Row r: a1 (kernel rows 0 and 2) + a2 (row 1); row r + 1: b1 + b2 alike.
      __m512 a1 = bias, a2 = zero, b1 = bias, b2 = zero;
#pragma GCC unroll 5
      for (int k = 0; k < kRows; ++k) {
        if (rows[k] == nullptr) continue;
        const Operands s = RowOperands<kS>(rows[k], base, g.in_w);
        if (k == 1) a2 = Taps(s, w + 3, a2);
        if (k == 0 || k == 2) a1 = Taps(s, w + 3 * k, a1);
        if (k == kS + 1) b2 = Taps(s, w + 3, b2);
        if (k == kS || k == kS + 2) b1 = Taps(s, w + 3 * (k - kS), b1);
      }
      const __mmask16 m = FirstLanes(g.out_w - oc);
      _mm512_mask_storeu_ps(yr + oc, m, Activate<kAct>(_mm512_add_ps(a1, a2), lo, hi));
      if (second) {
        _mm512_mask_storeu_ps(yr + g.out_w + oc, m, Activate<kAct>(_mm512_add_ps(b1, b2), lo, hi));
      }
    }
  }
}

template <int kS>
void PlaneAct(const ConvGeometry& g, const ConvEpilogue& act, const float* x, const float* w9,
              float b, float* y) {
  switch (act.kind) {
    case ConvActivation::kRelu:
      return Plane<kS, Act::kRelu>(g, x, w9, b, act.lo, act.hi, y);
    case ConvActivation::kClip:
      return Plane<kS, Act::kClip>(g, x, w9, b, act.lo, act.hi, y);
    default:  // kNone, and the others (applied after: LateActivationInPlace)
      return Plane<kS, Act::kNone>(g, x, w9, b, act.lo, act.hi, y);
  }
}

void AnyPlane(const ConvGeometry& g, const ConvEpilogue& act, const float* x, const float* w9,
              float b, float* y) {
  if (g.stride_w == 1) return PlaneAct<1>(g, act, x, w9, b, y);
  PlaneAct<2>(g, act, x, w9, b, y);
}

#else  // no AVX-512 build: DepthwiseInPlaneApplies is false

void AnyPlane(const ConvGeometry&, const ConvEpilogue&, const float*, const float*, float, float*) {
}

#endif  // defined(__x86_64__)

}  // namespace

bool DepthwiseInPlaneApplies(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act) {
  (void)act;  // every activation: Relu and Clip in registers, the others after
#if defined(__x86_64__)
  return PackedGemmUsesAvx512() && mg == 1 && g.k_h == 3 && g.k_w == 3 &&
         g.stride_h == g.stride_w && (g.stride_w == 1 || g.stride_w == 2) && g.dil_h == 1 &&
         g.dil_w == 1 && g.pad_top <= 2 && g.pad_left <= 2;
#else
  (void)g, (void)mg;
  return false;
#endif
}

bool DepthwiseInPlaneChosen(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act) {
  return DepthwiseInPlaneApplies(g, mg, act) && g.in_w >= kDepthwiseInPlaneMinInW;
}

absl::Status DepthwiseInPlane(const ConvGeometry& g, int64_t n, int64_t c, const float* x,
                              const float* w, const float* bias, const ConvEpilogue& act,
                              float* y) {
  if (!DepthwiseInPlaneApplies(g, 1, act)) {
    return absl::FailedPreconditionError("Conv: the in-plane depthwise loop does not apply");
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
