#include "kernels/cpu/winograd_conv.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/conv_activation.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/cpu/micro_kernel_12x16.h"
#include "kernels/cpu/micro_kernel_6x16.h"
#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {
namespace {

using micro::At;
using micro::MicroKernel;
using micro::V8;

constexpr int64_t kPos = 36;  // positions of a transformed 6 x 6 tile
// Fewest channels (in and out) for a Winograd packing: below them the transforms,
// which scale with c and m alone, outweigh the GEMMs they shorten.
constexpr int64_t kMinChannels = 16;
// Most A rows of a GEMM task (as the direct conv): a K block of them stays in L2.
constexpr int64_t kMaxTaskPanels = 16;
// V and M hold a chunk of tile panels at a time, at least this many bytes of them
// (resnet18 b1 layer1: 3 chunks of 6 panels), so a request's peak memory does not grow
// by the whole conv's V and M; a chunk also takes at least twice the padded input's
// bytes and twice U's, so the chunks' ParallelFor joins and their reads of U stay few
// (resnet18 b8: layer1 in 3 chunks, the deeper layers in 1 or 2).
constexpr int64_t kChunkBytes = int64_t{2} << 20;
// Channels one transform task takes: its 8-tile group's offsets are worked out once.
constexpr int64_t kChannelsPerTask = 16;

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }
// Rounds toward +infinity for any sign of a (b > 0).
int64_t CeilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Tiles, the zero-bordered copy of the input, and the scratch buffers of one call.
// The copy splits each padded row into 4 column phases (phase s holds padded columns
// s, s + 4, ...; tw + 1 of them), so column 4 * tx + q of tile tx sits at phase q mod 4,
// index tx + q / 4: for 8 tiles side by side in one tile row, each of a patch's 36
// elements is one contiguous 8-float load.
struct Layout {
  int64_t th, tw;     // tiles down and across one image
  int64_t tiles;      // n * th * tw
  int64_t tb;         // 16-tile B panels: ceil(tiles / 16)
  int64_t cp;         // panels per chunk: V and M hold one chunk's at a time
  int64_t hp, wq;     // padded plane: 4 * th + 2 rows of 4 phases of tw + 1
  int64_t plane;      // hp * wq
  int64_t mp;         // m rounded up to whole A panels
  int64_t xp, v, mb;  // floats of the padded copy, of V and of the GEMMs' output
};

// Floats read past a padded copy's last plane by a group's last tiles (their lanes run
// on past the row; the values are dropped).
constexpr int64_t kXpSlack = 64;

Layout MakeLayout(const ConvGeometry& g, int64_t n, int64_t c, int64_t m) {
  Layout l;
  l.th = CeilDiv(g.out_h, 4);
  l.tw = CeilDiv(g.out_w, 4);
  l.tiles = n * l.th * l.tw;
  l.tb = CeilDiv(l.tiles, kPackNr);
  l.hp = 4 * l.th + 2;
  l.wq = 4 * (l.tw + 1);
  l.plane = l.hp * l.wq;
  l.mp = RoundUp(m, kPackMr);
  l.xp = RoundUp(n * c * l.plane + kXpSlack, 16);
  const int64_t budget = std::max({kChunkBytes, 2 * 4 * kPos * l.mp * c, 2 * 4 * l.xp});
  l.cp = std::clamp<int64_t>(budget / (kPos * kPackNr * (c + l.mp) * 4), 1, l.tb);
  l.v = kPos * l.cp * kPackNr * c;
  l.mb = kPos * l.cp * kPackNr * l.mp;
  return l;
}

// One channel of one image into its padded plane: padded row r, column q (input row
// r - pad_top, column q - pad_left, zero outside the input) at phase q % 4, index q / 4.
void PadChannel(const ConvGeometry& g, const Layout& l, const float* x, float* xp) {
  const int64_t seg = l.tw + 1;
  for (int64_t r = 0; r < l.hp; ++r) {
    float* row = xp + r * l.wq;
    const int64_t ih = r - g.pad_top;
    if (ih < 0 || ih >= g.in_h) {
      std::fill(row, row + l.wq, 0.0f);
      continue;
    }
    const float* xr = x + ih * g.in_w;
    for (int64_t s = 0; s < 4; ++s) {
      // Phase s, index u holds input column s + 4 * u - pad_left: inside for [lo, hi).
      float* out = row + s * seg;
      const int64_t lo = std::clamp<int64_t>(CeilDiv(g.pad_left - s, 4), 0, seg);
      const int64_t hi = std::clamp<int64_t>(CeilDiv(g.in_w + g.pad_left - s, 4), lo, seg);
      std::fill(out, out + lo, 0.0f);
      for (int64_t u = lo; u < hi; ++u) out[u] = xr[s + 4 * u - g.pad_left];
      std::fill(out + hi, out + seg, 0.0f);
    }
  }
}

// An 8-tile group starting at tile t0 (over all images) as runs of lanes that lie side
// by side in one tile row: run i covers lanes [start[i], start[i + 1]) and reads lane j's
// tile at base[i] + j (plus the element's offset within a plane). Lanes past the last
// tile continue the last run (their reads stay inside the slack; their outputs are
// dropped).
struct Runs {
  int count;
  int64_t start[8];
  int64_t base[8];
};

Runs TileRuns(const Layout& l, int64_t c, int64_t t0) {
  Runs runs{0, {}, {}};
  const int64_t per_image = l.th * l.tw;
  for (int64_t j = 0; j < 8; ++j) {
    const int64_t t = t0 + j;
    if (t >= l.tiles && j > 0) break;
    const int64_t img = t / per_image, r = t % per_image, tx = r % l.tw;
    if (j > 0 && tx != 0) continue;
    runs.start[runs.count] = j;
    runs.base[runs.count] = img * c * l.plane + 4 * (r / l.tw) * l.wq + tx - j;
    ++runs.count;
  }
  return runs;
}

// out[i * so] = row i of B^T x, x the 6 vectors in[j * si].
__attribute__((always_inline)) inline void InputRows(const V8* in, int64_t si, V8* out,
                                                     int64_t so) {
  const V8 d0 = in[0], d1 = in[si], d2 = in[2 * si], d3 = in[3 * si], d4 = in[4 * si],
           d5 = in[5 * si];
  const V8 four = {4, 4, 4, 4, 4, 4, 4, 4}, five = {5, 5, 5, 5, 5, 5, 5, 5};
  const V8 two = {2, 2, 2, 2, 2, 2, 2, 2};
  const V8 a = d4 - four * d2, b = d3 - four * d1;  // rows 1, 2: a +- b
  const V8 e = d4 - d2, f = two * (d3 - d1);        // rows 3, 4: e +- f
  out[0] = four * d0 - five * d2 + d4;
  out[so] = a + b;
  out[2 * so] = a - b;
  out[3 * so] = e + f;
  out[4 * so] = e - f;
  out[5 * so] = four * d1 - five * d3 + d5;
}

// out[i * so] = row i of A^T x, x the 6 vectors in[j * si].
__attribute__((always_inline)) inline void OutputRows(const V8* in, int64_t si, V8* out,
                                                      int64_t so) {
  const V8 m0 = in[0], m1 = in[si], m2 = in[2 * si], m3 = in[3 * si], m4 = in[4 * si],
           m5 = in[5 * si];
  const V8 two = {2, 2, 2, 2, 2, 2, 2, 2}, four = {4, 4, 4, 4, 4, 4, 4, 4};
  const V8 eight = {8, 8, 8, 8, 8, 8, 8, 8};
  const V8 s12 = m1 + m2, d12 = m1 - m2, s34 = m3 + m4, d34 = m3 - m4;
  out[0] = m0 + s12 + s34;
  out[so] = d12 + two * d34;
  out[2 * so] = s12 + four * s34;
  out[3 * so] = d12 + eight * d34 + m5;
}

typedef int32_t V8i __attribute__((vector_size(32)));

// V for 8-tile group g and channels [c0, c1): V holds, per position p and 16-tile panel
// b, a c x 16 B panel at (p * tb + b) * c * 16.
NDS_CPU_CLONES
void InputTransform(const Layout& l, int64_t c, const float* xp, int64_t g, int64_t pb0, int64_t c0,
                    int64_t c1, float* v) {
  const int64_t panel = g / 2 - pb0, lane0 = (g % 2) * 8, pstride = l.cp * c * kPackNr;
  if (g * 8 >= l.tiles) {  // the empty half of the last panel: zeros for the GEMMs
    for (int64_t p = 0; p < kPos; ++p) {
      for (int64_t ci = c0; ci < c1; ++ci)
        *At(v + p * pstride + (panel * c + ci) * kPackNr + lane0) = V8{};
    }
    return;
  }
  const Runs runs = TileRuns(l, c, g * 8);
  const V8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
  V8i from[8];  // lanes a later run overrides
  for (int i = 1; i < runs.count; ++i) from[i] = lane >= static_cast<int32_t>(runs.start[i]);
  // Where column q of a tile's patch sits past its tile's index, within a padded row.
  const int64_t seg = l.tw + 1;
  const int64_t qoff[6] = {0, seg, 2 * seg, 3 * seg, 1, seg + 1};
  V8 d[kPos], t[kPos], u[kPos];
  for (int64_t ci = c0; ci < c1; ++ci) {
    const float* base = xp + ci * l.plane;
    for (int64_t r = 0; r < 6; ++r) {
      for (int64_t q = 0; q < 6; ++q) {
        const int64_t off = r * l.wq + qoff[q];
        V8 e = *At(base + runs.base[0] + off);
        for (int i = 1; i < runs.count; ++i) {
          const V8 o = *At(base + runs.base[i] + off);
          e = (V8)(((V8i)o & from[i]) | ((V8i)e & ~from[i]));
        }
        d[r * 6 + q] = e;
      }
    }
    for (int64_t q = 0; q < 6; ++q) InputRows(d + q, 6, t + q, 6);      // columns: B^T d
    for (int64_t r = 0; r < 6; ++r) InputRows(t + r * 6, 1, u + r, 6);  // rows: (B^T d) B
    // u holds the transpose of B^T d B; position p = r * 6 + q reads u[q * 6 + r].
    float* dst = v + (panel * c + ci) * kPackNr + lane0;
    for (int64_t r = 0; r < 6; ++r) {
      for (int64_t q = 0; q < 6; ++q) *At(dst + (r * 6 + q) * pstride) = u[q * 6 + r];
    }
  }
}

// The GEMMs of positions x M blocks: M_p [mp x 16 per panel] for panels [b0, b1).
// kWide: 12 x 16 tiles of 16-wide vectors (micro_kernel_12x16.h) while two 6-row panels
// of U are left, two panels per B panel read; the same sums in the same order as the
// 6 x 16 kernel, so the same bits. Inlined into each ISA's task below.
template <bool kWide>
__attribute__((always_inline)) inline void GemmTaskBody(const Layout& l, const PackedMatrix& u,
                                                        int64_t c, const float* v, int64_t p,
                                                        int64_t i0, int64_t i1, int64_t b0,
                                                        int64_t b1, float* mbuf) {
  for (int64_t k0 = 0; k0 < c; k0 += kPackKc) {
    const int64_t kb = std::min(kPackKc, c - k0);
    for (int64_t b = b0; b < b1; ++b) {
      const float* bp = v + ((p * l.cp + b) * c + k0) * kPackNr;
      const auto brow = [bp](int64_t r) { return bp + r * kPackNr; };
      float* out = mbuf + (p * l.cp + b) * l.mp * kPackNr;
      int64_t i = i0;
      if constexpr (kWide) {
        for (; i + 2 * kPackMr <= i1; i += 2 * kPackMr) {
          const float* a = u.Panel(k0, kb, p * l.mp + i);
          micro::MicroKernel12<micro::V16>(kb, a, a + kPackMr * kb, brow, out + i * kPackNr,
                                           kPackNr, k0 > 0);
        }
      }
      for (; i < i1; i += kPackMr) {
        MicroKernel(kb, u.Panel(k0, kb, p * l.mp + i), brow, out + i * kPackNr, kPackNr, k0 > 0);
      }
    }
  }
}

NDS_CPU_CLONES
void GemmTask(const Layout& l, const PackedMatrix& u, int64_t c, const float* v, int64_t p,
              int64_t i0, int64_t i1, int64_t b0, int64_t b1, float* mbuf) {
  GemmTaskBody<false>(l, u, c, v, p, i0, i1, b0, b1, mbuf);
}

#if defined(__x86_64__)
__attribute__((target("arch=x86-64-v4"))) void GemmTaskAvx512(const Layout& l,
                                                              const PackedMatrix& u, int64_t c,
                                                              const float* v, int64_t p, int64_t i0,
                                                              int64_t i1, int64_t b0, int64_t b1,
                                                              float* mbuf) {
  GemmTaskBody<true>(l, u, c, v, p, i0, i1, b0, b1, mbuf);
}
#endif

// The 4 x 8 floats of outputs (r, 0..3) of 8 tiles, each column j in one vector over
// the tiles, as 32 floats in image order: tile l's four at 4 * l.
__attribute__((always_inline)) inline void InterleaveRow(const V8* ov, int64_t r, float* out) {
  typedef int32_t I8 __attribute__((vector_size(32)));
  const V8 a0 = ov[r], a1 = ov[r + 4], a2 = ov[r + 8], a3 = ov[r + 12];
  const V8 ab_lo = __builtin_shuffle(a0, a1, I8{0, 8, 1, 9, 2, 10, 3, 11});
  const V8 ab_hi = __builtin_shuffle(a0, a1, I8{4, 12, 5, 13, 6, 14, 7, 15});
  const V8 cd_lo = __builtin_shuffle(a2, a3, I8{0, 8, 1, 9, 2, 10, 3, 11});
  const V8 cd_hi = __builtin_shuffle(a2, a3, I8{4, 12, 5, 13, 6, 14, 7, 15});
  *At(out) = __builtin_shuffle(ab_lo, cd_lo, I8{0, 1, 8, 9, 2, 3, 10, 11});
  *At(out + 8) = __builtin_shuffle(ab_lo, cd_lo, I8{4, 5, 12, 13, 6, 7, 14, 15});
  *At(out + 16) = __builtin_shuffle(ab_hi, cd_hi, I8{0, 1, 8, 9, 2, 3, 10, 11});
  *At(out + 24) = __builtin_shuffle(ab_hi, cd_hi, I8{4, 5, 12, 13, 6, 7, 14, 15});
}

// Y for 8-tile group g and output channels [m0, m1): A^T M A + bias, through `op`. The
// group's tiles that lie side by side in one tile row write each output row as one run.
template <typename Op>
__attribute__((always_inline)) inline void OutputTransformOp(const ConvGeometry& g, const Layout& l,
                                                             int64_t m, const float* mbuf,
                                                             const float* bias, int64_t grp,
                                                             int64_t pb0, int64_t m0, int64_t m1,
                                                             float* y, Op op) {
  const int64_t panel = grp / 2, lane0 = (grp % 2) * 8, per_image = l.th * l.tw;
  struct Run {
    int64_t j0, dst, rows, cols;  // first lane, Y offset at channel 0, valid rows, floats
  } runs[8];
  int count = 0;
  for (int64_t j = 0; j < 8 && grp * 8 + j < l.tiles; ++j) {
    const int64_t t = grp * 8 + j, img = t / per_image, r = t % per_image;
    const int64_t oh = 4 * (r / l.tw), ow = 4 * (r % l.tw);
    if (j == 0 || ow == 0) {
      runs[count++] = {j, img * m * g.out_plane() + oh * g.out_w + ow,
                       std::min<int64_t>(4, g.out_h - oh), 0};
    }
    runs[count - 1].cols = std::min(g.out_w, ow + 4) - (ow - 4 * (j - runs[count - 1].j0));
  }
  const int64_t pstride = l.cp * l.mp * kPackNr;
  V8 mv[kPos], t[24], ov[16];
  alignas(32) float row[32];
  for (int64_t mi = m0; mi < m1; ++mi) {
    const float* src = mbuf + ((panel - pb0) * l.mp + mi) * kPackNr + lane0;
    for (int64_t p = 0; p < kPos; ++p) mv[p] = *At(src + p * pstride);
    // mv[r * 6 + q]: columns first (A^T M), then rows; t[i * 6 + q] = row i of A^T M.
    for (int64_t q = 0; q < 6; ++q) OutputRows(mv + q, 6, t + q, 6);
    for (int64_t i = 0; i < 4; ++i) OutputRows(t + i * 6, 1, ov + i, 4);
    // ov[j * 4 + i] = output (i, j).
    const float b = bias != nullptr ? bias[mi] : 0.0f;
    float* ym = y + mi * g.out_plane();
    for (int64_t r = 0; r < 4; ++r) {
      InterleaveRow(ov, r, row);
      for (int i = 0; i < count; ++i) {
        if (r >= runs[i].rows) continue;
        const float* in = row + 4 * runs[i].j0;
        float* out = ym + runs[i].dst + r * g.out_w;
        if constexpr (std::is_same_v<Op, LateActivationOp>) {
          for (int64_t k = 0; k < runs[i].cols; ++k) out[k] = in[k] + b;
          LateActivationInPlace(op.kind, out, runs[i].cols);
        } else {
          for (int64_t k = 0; k < runs[i].cols; ++k) out[k] = op(in[k] + b);
        }
      }
    }
  }
}

NDS_CPU_CLONES
void OutputTransform(const ConvGeometry& g, const Layout& l, int64_t m, const float* mbuf,
                     const float* bias, const ConvEpilogue& act, int64_t grp, int64_t pb0,
                     int64_t m0, int64_t m1, float* y) {
  switch (act.kind) {
    case ConvActivation::kNone:
      return OutputTransformOp(g, l, m, mbuf, bias, grp, pb0, m0, m1, y, IdentityOp());
    case ConvActivation::kRelu:
      return OutputTransformOp(g, l, m, mbuf, bias, grp, pb0, m0, m1, y, ReluOp());
    case ConvActivation::kClip:
      return OutputTransformOp(g, l, m, mbuf, bias, grp, pb0, m0, m1, y, ClipOp{act.lo, act.hi});
    case ConvActivation::kHardSwish:
    case ConvActivation::kSigmoid:
    case ConvActivation::kSilu:
      return OutputTransformOp(g, l, m, mbuf, bias, grp, pb0, m0, m1, y, LateActivationOp{act.kind});
  }
}

}  // namespace

// Not on AMD's Zen 4 (family 0x19), which runs each 512-bit FMA as two 256-bit halves:
// there the 12-row tiles made resnet18's 3x3 convs 2-9 % slower at batch 1 (U is streamed
// with little reuse). On Zen 5 (family 0x1a), whose FMA units are 512 bits wide, they took
// resnet18 b8 from 38-40 to 44-45 rows/s on one thread and left b1 level
// (docs/benchmark-history.md, "Zen 5").
bool WinogradUsesAvx512() {
#if defined(__x86_64__)
  static const bool use = [] {
    if (!PackedGemmUsesAvx512()) return false;
    unsigned eax, ebx, ecx, edx;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return true;
    const bool amd = ebx == 0x68747541 && edx == 0x69746e65 && ecx == 0x444d4163;  // AuthenticAMD
    if (!amd || __get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return true;
    const unsigned base = (eax >> 8) & 0xf;
    const unsigned family = base == 0xf ? base + ((eax >> 20) & 0xff) : base;
    return family != 0x19;
  }();
  return use;
#else
  return false;
#endif
}

namespace {
// SetWinogradAvx512ForTesting's choice; -1: none.
std::atomic<int> winograd_avx512_override{-1};
}  // namespace

void SetWinogradAvx512ForTesting(int use) { winograd_avx512_override.store(use); }

bool WinogradWeightSuits(const ConvAttrs& attrs, int64_t m, int64_t c, int64_t kh, int64_t kw) {
  const auto all_one = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
  };
  return attrs.group == 1 && kh == 3 && kw == 3 && all_one(attrs.strides) &&
         all_one(attrs.dilations) && m >= kMinChannels && c >= kMinChannels;
}

std::unique_ptr<PackedMatrix> PackWinogradWeight(const float* w, int64_t m, int64_t c) {
  // G of F(4x4, 3x3), in double so U's rounding is one float rounding per element.
  static constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                                      {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                      {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                      {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                      {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                      {0, 0, 1}};
  const int64_t mp = RoundUp(m, kPackMr);
  std::vector<float> src(kPos * mp * c, 0.0f);
  for (int64_t mi = 0; mi < m; ++mi) {
    for (int64_t ci = 0; ci < c; ++ci) {
      const float* f = w + (mi * c + ci) * 9;
      double gf[6][3];  // G f
      for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 3; ++j) {
          gf[i][j] = kG[i][0] * f[j] + kG[i][1] * f[3 + j] + kG[i][2] * f[6 + j];
        }
      }
      for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 6; ++j) {
          const double uij = gf[i][0] * kG[j][0] + gf[i][1] * kG[j][1] + gf[i][2] * kG[j][2];
          src[((i * 6 + j) * mp + mi) * c + ci] = static_cast<float>(uij);
        }
      }
    }
  }
  return std::make_unique<PackedMatrix>(
      PackedMatrix::Pack(PackedMatrix::Side::kA, MatrixRef{src.data(), c, false}, kPos * mp, c));
}

bool WinogradConvSuits(const ConvGeometry& g, const PackedMatrix& u, int64_t n, int64_t c,
                       int64_t m) {
  if (g.k_h != 3 || g.k_w != 3 || g.stride_h != 1 || g.stride_w != 1 || g.dil_h != 1 ||
      g.dil_w != 1 || u.side() != PackedMatrix::Side::kA || u.cols() != c ||
      u.rows() != kPos * RoundUp(m, kPackMr)) {
    return false;
  }
  // Fewer tiles than a B panel: the GEMMs would read all of U (4x W) for a partial panel,
  // where the direct conv reads W once (resnet18's last stage at batch 1: 4 tiles).
  return n * CeilDiv(g.out_h, 4) * CeilDiv(g.out_w, 4) >= kPackNr;
}

int64_t WinogradConvScratchFloats(const ConvGeometry& g, int64_t n, int64_t c, int64_t m) {
  const Layout l = MakeLayout(g, n, c, m);
  return l.xp + l.v + l.mb;
}

void WinogradConv(const ConvGeometry& g, const PackedMatrix& u, int64_t n, int64_t c, int64_t m,
                  const float* x, const float* bias, const ConvEpilogue& act, float* scratch,
                  float* y) {
  const Layout l = MakeLayout(g, n, c, m);
  float* xp = scratch;
  float* v = xp + l.xp;
  float* mbuf = v + l.v;
  const int threads = IntraOpThreads();
  const int forced = winograd_avx512_override.load(std::memory_order_relaxed);
  const bool wide = forced < 0 ? WinogradUsesAvx512() : forced == 1 && PackedGemmUsesAvx512();

  ParallelFor(n * c, std::max<int64_t>(1, (int64_t{16} << 10) / l.plane),
              [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i)
                  PadChannel(g, l, x + i * g.in_plane(), xp + i * l.plane);
              });
  std::fill(xp + n * c * l.plane, xp + l.xp, 0.0f);

  const int64_t c_tasks = CeilDiv(c, kChannelsPerTask);
  const int64_t panels = CeilDiv(m, kPackMr);
  const int64_t m_tasks = CeilDiv(panels, kMaxTaskPanels);
  // An even count of panels per task where the GEMMs take 12-row tiles: no 6-row tail
  // inside a task.
  const int64_t mb = RoundUp(CeilDiv(panels, m_tasks), wide ? 2 : 1) * kPackMr;
  const int64_t m_chunks = CeilDiv(m, kChannelsPerTask);
  for (int64_t pb0 = 0; pb0 < l.tb; pb0 += l.cp) {
    const int64_t nb = std::min(l.cp, l.tb - pb0);
    // Tasks take whole 16-tile panels, never one 8-tile half: the two halves of a panel
    // share every 64-byte line of V (and of M), which two threads writing at once would
    // pass back and forth.
    ParallelFor(nb * c_tasks, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t panel = pb0 + t / c_tasks, c0 = (t % c_tasks) * kChannelsPerTask;
        const int64_t c1 = std::min(c, c0 + kChannelsPerTask);
        InputTransform(l, c, xp, 2 * panel, pb0, c0, c1, v);
        InputTransform(l, c, xp, 2 * panel + 1, pb0, c0, c1, v);
      }
    });

    // Positions x M blocks x runs of B panels; runs are cut only when there are fewer
    // tasks than four per thread.
    const int64_t b_tasks = std::clamp<int64_t>(CeilDiv(4 * threads, kPos * m_tasks), 1, nb);
    const int64_t bt = CeilDiv(nb, b_tasks);
    ParallelFor(kPos * m_tasks * b_tasks, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t p = t / (m_tasks * b_tasks), r = t % (m_tasks * b_tasks);
        const int64_t i0 = (r / b_tasks) * mb, b0 = (r % b_tasks) * bt;
        const int64_t i1 = std::min(l.mp, i0 + mb), b1 = std::min(nb, b0 + bt);
#if defined(__x86_64__)
        if (wide) {
          GemmTaskAvx512(l, u, c, v, p, i0, i1, b0, b1, mbuf);
          continue;
        }
#endif
        GemmTask(l, u, c, v, p, i0, i1, b0, b1, mbuf);
      }
    });

    ParallelFor(nb * m_chunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t panel = pb0 + t / m_chunks, m0 = (t % m_chunks) * kChannelsPerTask;
        const int64_t m1 = std::min(m, m0 + kChannelsPerTask);
        for (int64_t grp = 2 * panel; grp < 2 * panel + 2 && grp * 8 < l.tiles; ++grp) {
          OutputTransform(g, l, m, mbuf, bias, act, grp, pb0, m0, m1, y);
        }
      }
    });
  }
}

}  // namespace ndserve::kernels::cpu
