// The sixteen-channel depthwise Conv (depthwise_conv_c16.h). A task is one image's block
// of sixteen channels and a band of output rows:
//
// 1. The band's input rows, as one flat run per plane (rows are contiguous in NCHW), are
//    read sixteen floats from each of the sixteen planes at a time and transposed in
//    registers into sixteen pixel vectors, which land in T: a pixel-major copy of the
//    band with its padding, one 64-byte vector per padded pixel.
// 2. Each output pixel is bias + the K * K taps' vectors times the weights' (the block's
//    sixteen channels per tap, in registers for the whole task), four pixels at a time
//    so that each T vector a kernel row reads is loaded once for the four, then the
//    activation; into O, pixel-major.
// 3. O is transposed back sixteen pixels at a time and stored into the sixteen output
//    planes' rows, masked at the band's end and for a last block of fewer channels.
//
// Every load of T is aligned and no tap tests a bound: the padding is in T. The transposes
// cost about as much as the sums, and still beat a per-plane loop on planes under ~56
// columns, whose rows do not fill vectors (benchmarks/depthwise_benchmark.cc).
#include "kernels/cpu/depthwise_conv_c16.h"

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/status_macros.h"
#include "kernels/cpu/avx512_lanes.h"
#include "kernels/cpu/depthwise_conv_in_plane.h"
#include "kernels/cpu/depthwise_conv_kxk.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {
namespace {

constexpr int64_t kLanes = 16;
// T's size per task at most: a band that stays in the core's L2 beside O and the planes'
// rows it reads and writes.
constexpr int64_t kBandBytes = int64_t{48} << 10;

// Inputs wider than this at stride 2 take the row loop (DepthwiseC16Chosen).
constexpr int64_t kMaxStride2Width = 64;

struct Plan {
  int64_t k, s;      // window and stride, both axes
  int64_t wp;        // padded pixels per T row: every column an output reads
  int64_t cblocks;   // blocks of sixteen channels per image
  int64_t band;      // output rows per task
  int64_t bands;     // per block
  int64_t t_floats;  // T: ((band - 1) * s + k) rows of wp pixels
  int64_t task_floats;  // T, then O (band * out_w pixels, rounded up to sixteen)
};

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

Plan MakePlan(const ConvGeometry& g, int64_t n, int64_t c) {
  Plan p{};
  p.k = g.k_w;
  p.s = g.stride_w;
  p.wp = (g.out_w - 1) * p.s + p.k;
  p.cblocks = CeilDiv(c, kLanes);
  const int64_t row_bytes = p.wp * kLanes * static_cast<int64_t>(sizeof(float));
  const int64_t rows_fit = std::max(p.k, kBandBytes / row_bytes);
  p.band = std::min(g.out_h, (rows_fit - p.k) / p.s + 1);
  // A few tasks per thread, so uneven ones even out; but bands of at least four rows,
  // since each band transposes again the K - s input rows it shares with the one before.
  const int64_t want = 4 * IntraOpThreads();
  while (p.band > 4 && n * p.cblocks * CeilDiv(g.out_h, p.band) < want) p.band = (p.band + 1) / 2;
  p.bands = CeilDiv(g.out_h, p.band);
  p.t_floats = ((p.band - 1) * p.s + p.k) * p.wp * kLanes;
  p.task_floats = p.t_floats + CeilDiv(p.band * g.out_w, kLanes) * kLanes * kLanes;
  return p;
}

struct Args {
  ConvGeometry g;
  int64_t c;
  const float* x;
  const float* w;
  const float* bias;
  ConvEpilogue act;
  float* y;
};

// Where task `task` works: image, first channel, channels, output rows [oy0, oy1).
struct Task {
  int64_t img, c0, lanes, oy0, oy1;
};

Task TaskAt(const Args& a, const Plan& p, int64_t task) {
  Task t;
  const int64_t bd = task % p.bands, rest = task / p.bands;
  t.img = rest / p.cblocks;
  t.c0 = rest % p.cblocks * kLanes;
  t.lanes = std::min(kLanes, a.c - t.c0);
  t.oy0 = bd * p.band;
  t.oy1 = std::min(a.g.out_h, t.oy0 + p.band);
  return t;
}

#if defined(__x86_64__)

using avx512::Act;
using avx512::Activate;
using avx512::FirstLanes;

// r[i][j] <-> r[j][i]: within each 128-bit lane, 2x2 then 4x4 blocks (unpack, shuffle);
// then the four lanes of four registers at a time (shuffle_f32x4, twice). 64 shuffles.
NDS_AVX512_INLINE void Transpose16(__m512* r) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4 * q + e], lane j: column 4 * j + e of rows 4 * q .. 4 * q + 3.
  for (int q = 0; q < 4; ++q) {
    u[4 * q + 0] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
    u[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
    u[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
    u[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
  }
  for (int e = 0; e < 4; ++e) {
    const __m512 lo01 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x44);
    const __m512 lo23 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x44);
    const __m512 hi01 = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xEE);
    const __m512 hi23 = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xEE);
    r[e] = _mm512_shuffle_f32x4(lo01, lo23, 0x88);
    r[4 + e] = _mm512_shuffle_f32x4(lo01, lo23, 0xDD);
    r[8 + e] = _mm512_shuffle_f32x4(hi01, hi23, 0x88);
    r[12 + e] = _mm512_shuffle_f32x4(hi01, hi23, 0xDD);
  }
}

// T's padding for the band whose row 0 is image row row0: rows outside the image and the
// columns left and right of it. The image's pixels are all rewritten by LoadBand.
NDS_AVX512_INLINE void ZeroPadding(const ConvGeometry& g, const Plan& p, int64_t row0,
                                int64_t rows, float* t) {
  const __m512 zero = _mm512_setzero_ps();
  const int64_t right = std::min(p.wp, g.pad_left + g.in_w);
  for (int64_t r = 0; r < rows; ++r) {
    float* tr = t + r * p.wp * kLanes;
    const int64_t ih = row0 + r;
    if (ih < 0 || ih >= g.in_h) {
      for (int64_t j = 0; j < p.wp; ++j) _mm512_store_ps(tr + j * kLanes, zero);
      continue;
    }
    for (int64_t j = 0; j < std::min(g.pad_left, p.wp); ++j) _mm512_store_ps(tr + j * kLanes, zero);
    for (int64_t j = right; j < p.wp; ++j) _mm512_store_ps(tr + j * kLanes, zero);
  }
}

// Image rows [ih_lo, ih_hi) of the block's planes into T (row 0 = image row row0), as one
// flat run per plane: sixteen pixels of every plane per transpose, whatever the width.
NDS_AVX512_INLINE void LoadBand(const ConvGeometry& g, const Plan& p, const float* const* planes,
                             int64_t lanes, int64_t ih_lo, int64_t ih_hi, int64_t row0,
                             float* t) {
  int64_t ih = ih_lo, iw = 0;
  const int64_t end = ih_hi * g.in_w;
  __m512 r[kLanes];
  for (int64_t f = ih_lo * g.in_w; f < end; f += kLanes) {
    const int64_t count = std::min(kLanes, end - f);
    const __mmask16 m = FirstLanes(count);
#pragma GCC unroll 16
    for (int l = 0; l < kLanes; ++l) {
      r[l] = l < lanes ? _mm512_maskz_loadu_ps(m, planes[l] + f) : _mm512_setzero_ps();
    }
    Transpose16(r);
#pragma GCC unroll 16
    for (int j = 0; j < kLanes; ++j) {
      if (j >= count) break;
      const int64_t tc = iw + g.pad_left;
      if (tc < p.wp) _mm512_store_ps(t + ((ih - row0) * p.wp + tc) * kLanes, r[j]);
      if (++iw == g.in_w) iw = 0, ++ih;
    }
  }
}

// kG consecutive output pixels of one row (tr: T's first row of their window) into o.
template <int kK, int kS, int kG, Act kAct>
NDS_AVX512_INLINE void SumPixels(const float* tr, int64_t t_row, const __m512* wv, __m512 bias,
                              __m512 lo, __m512 hi, float* o) {
  constexpr int kSpan = (kG - 1) * kS + kK;  // T pixels a kernel row reads for kG outputs
  __m512 acc[kG];
#pragma GCC unroll 8
  for (int j = 0; j < kG; ++j) acc[j] = bias;
#pragma GCC unroll 5
  for (int ki = 0; ki < kK; ++ki) {
    __m512 v[kSpan];
#pragma GCC unroll 16
    for (int q = 0; q < kSpan; ++q) v[q] = _mm512_load_ps(tr + (ki * t_row + q) * kLanes);
#pragma GCC unroll 5
    for (int kj = 0; kj < kK; ++kj) {
#pragma GCC unroll 8
      for (int j = 0; j < kG; ++j) acc[j] = _mm512_fmadd_ps(wv[ki * kK + kj], v[j * kS + kj], acc[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < kG; ++j) _mm512_store_ps(o + j * kLanes, Activate<kAct>(acc[j], lo, hi));
}

template <int kK, int kS, Act kAct>
__attribute__((target("arch=x86-64-v4"))) void RunTask(const Args& a, const Plan& p,
                                                      const Task& k, float* buf) {
  const ConvGeometry& g = a.g;
  const float* xp[kLanes];
  float* yp[kLanes];
  for (int64_t l = 0; l < k.lanes; ++l) {
    xp[l] = a.x + ((k.img * a.c) + k.c0 + l) * g.in_plane();
    yp[l] = a.y + ((k.img * a.c) + k.c0 + l) * g.out_plane();
  }
  // The block's weights, one vector per tap, and its bias; lanes past the last channel 0.
  __m512 wv[kK * kK];
  alignas(64) float lane[kLanes];
  for (int t = 0; t < kK * kK; ++t) {
    for (int64_t l = 0; l < kLanes; ++l) lane[l] = l < k.lanes ? a.w[(k.c0 + l) * kK * kK + t] : 0.0f;
    wv[t] = _mm512_load_ps(lane);
  }
  for (int64_t l = 0; l < kLanes; ++l) {
    lane[l] = l < k.lanes && a.bias != nullptr ? a.bias[k.c0 + l] : 0.0f;
  }
  const __m512 bias = _mm512_load_ps(lane);
  const __m512 lo = _mm512_set1_ps(a.act.lo), hi = _mm512_set1_ps(a.act.hi);

  float* t = buf;
  float* o = buf + p.t_floats;
  const int64_t rows = k.oy1 - k.oy0;
  const int64_t row0 = k.oy0 * kS - g.pad_top, t_rows = (rows - 1) * kS + kK;
  ZeroPadding(g, p, row0, t_rows, t);
  const int64_t ih_lo = std::max<int64_t>(0, row0), ih_hi = std::min(g.in_h, row0 + t_rows);
  if (ih_lo < ih_hi) LoadBand(g, p, xp, k.lanes, ih_lo, ih_hi, row0, t);

  const int64_t t_row = p.wp;  // pixels
  for (int64_t r = 0; r < rows; ++r) {
    const float* tr = t + r * kS * t_row * kLanes;
    float* orow = o + r * g.out_w * kLanes;
    int64_t ox = 0;
    for (; ox + 4 <= g.out_w; ox += 4) {
      SumPixels<kK, kS, 4, kAct>(tr + ox * kS * kLanes, t_row, wv, bias, lo, hi,
                                 orow + ox * kLanes);
    }
    for (; ox < g.out_w; ++ox) {
      SumPixels<kK, kS, 1, kAct>(tr + ox * kS * kLanes, t_row, wv, bias, lo, hi,
                                 orow + ox * kLanes);
    }
  }

  // O back into the planes, sixteen pixels of the band's flat run at a time.
  const int64_t count = rows * g.out_w, f0 = k.oy0 * g.out_w;
  __m512 v[kLanes];
  for (int64_t f = 0; f < count; f += kLanes) {
#pragma GCC unroll 16
    for (int j = 0; j < kLanes; ++j) v[j] = _mm512_load_ps(o + (f + j) * kLanes);
    Transpose16(v);
    const __mmask16 m = FirstLanes(count - f);
#pragma GCC unroll 16
    for (int l = 0; l < kLanes; ++l) {
      if (l < k.lanes) _mm512_mask_storeu_ps(yp[l] + f0 + f, m, v[l]);
    }
  }
}

template <int kK, int kS>
void RunTaskAct(const Args& a, const Plan& p, const Task& k, float* buf) {
  switch (a.act.kind) {
    case ConvActivation::kRelu:
      return RunTask<kK, kS, Act::kRelu>(a, p, k, buf);
    case ConvActivation::kClip:
      return RunTask<kK, kS, Act::kClip>(a, p, k, buf);
    default:  // kNone, and the others (applied after: LateActivationInPlace)
      return RunTask<kK, kS, Act::kNone>(a, p, k, buf);
  }
}

void RunAnyTask(const Args& a, const Plan& p, const Task& k, float* buf) {
  if (p.k == 3) {
    return p.s == 1 ? RunTaskAct<3, 1>(a, p, k, buf) : RunTaskAct<3, 2>(a, p, k, buf);
  }
  return p.s == 1 ? RunTaskAct<5, 1>(a, p, k, buf) : RunTaskAct<5, 2>(a, p, k, buf);
}

#else   // no AVX-512 build: DepthwiseC16Applies is false

void RunAnyTask(const Args&, const Plan&, const Task&, float*) {}

#endif  // defined(__x86_64__)

}  // namespace

bool DepthwiseC16Applies(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act) {
#if defined(__x86_64__)
  (void)act;  // every activation: Relu and Clip in registers, the others after
  return PackedGemmUsesAvx512() && mg == 1 && DepthwiseKxKApplies(g);
#else
  (void)g, (void)mg, (void)act;
  return false;
#endif
}

bool DepthwiseC16Chosen(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act) {
  // 3x3 windows on rows of 28 floats or more: the in-plane loop (depthwise_conv_in_plane.h),
  // which transposes nothing. Wide planes at stride 2 otherwise (5x5) keep the row loop:
  // there the transposes of four input pixels per output cost more than its even / odd
  // split (mobilenet_v2's 96 planes of 112x112, one thread: 306-354 us against 248-252).
  return DepthwiseC16Applies(g, mg, act) && !DepthwiseInPlaneChosen(g, mg, act) &&
         !(g.stride_w == 2 && g.in_w > kMaxStride2Width);
}

absl::Status DepthwiseC16(const KernelContext& ctx, const ConvGeometry& g, int64_t n, int64_t c,
                          const float* x, const float* w, const float* bias,
                          const ConvEpilogue& act, float* y) {
  if (!DepthwiseC16Applies(g, 1, act)) {
    return absl::FailedPreconditionError("Conv: the sixteen-channel depthwise loop does not apply");
  }
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError("Conv: the kernel context has no scratch allocator");
  }
  const Plan p = MakePlan(g, n, c);
  const int64_t tasks = n * p.cblocks * p.bands;
  // One working space per group of consecutive tasks, as many groups as the plane blocks
  // of the other depthwise loops (a few per thread).
  const int64_t groups = std::min<int64_t>(tasks, 4 * IntraOpThreads());
  NDS_ASSIGN_OR_RETURN(void* mem,
                       ctx.scratch->Allocate(static_cast<std::size_t>(
                           (groups * p.task_floats + kLanes) * sizeof(float))));
  // T and O are read and written as aligned vectors.
  const auto at = (reinterpret_cast<std::uintptr_t>(mem) + 63) / 64 * 64;
  float* bufs = reinterpret_cast<float*>(at);
  const Args args{g, c, x, w, bias, act, y};
  ParallelFor(groups, 1, [&](int64_t g0, int64_t g1) {
    for (int64_t grp = g0; grp < g1; ++grp) {
      for (int64_t task = grp * tasks / groups; task < (grp + 1) * tasks / groups; ++task) {
        const Task k = TaskAt(args, p, task);
        RunAnyTask(args, p, k, bufs + grp * p.task_floats);
        for (int64_t l = 0; l < k.lanes; ++l) {
          const int64_t at = (k.img * c + k.c0 + l) * g.out_plane() + k.oy0 * g.out_w;
          if (!LateActivationInPlace(act.kind, y + at, (k.oy1 - k.oy0) * g.out_w)) break;
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
