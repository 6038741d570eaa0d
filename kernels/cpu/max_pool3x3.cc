// MaxPool 3x3 at stride 1 or 2 (max_pool3x3.h). The max over a window is the max over
// its rows of the max over its columns, so each input row's three-column maxima are
// taken once, eight outputs at a time (at stride 2 from sixteen floats split into evens
// and odds by shuffles), into a ring of three lines, and each output row is the max of
// three of those lines: six comparisons per output instead of nine, and no bounds test.
// Each input row is first copied into a line whose padding is -inf, the one value that
// never wins a max, so the padding takes no part; rows wholly in the padding read a -inf
// line. A NaN wins every comparison it is in, as in MaxPoolRows (pool.cc).
#include "kernels/cpu/max_pool3x3.h"

#include <algorithm>
#include <limits>

#include "base/status_macros.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {
namespace {

typedef float F8 __attribute__((vector_size(32), aligned(4), may_alias));
typedef int I8 __attribute__((vector_size(32)));

// As in depthwise_conv_kxk.cc: expressions, not functions taking or returning F8.
#define NDS_MP_LOAD(p) (*reinterpret_cast<const F8*>(p))
#define NDS_MP_STORE(p, v) (*reinterpret_cast<F8*>(p) = (v))

// m = max(m, v), where a NaN v replaces m and a NaN m stays (v > NaN is false).
[[gnu::always_inline]] inline void MaxInto(F8& m, const F8& v) {
  const I8 take = (v > m) | (v != v);
  m = take ? v : m;
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One task's lines: the padded input row, then the ring of three column-max lines.
struct Plan {
  int64_t s;            // stride, both axes
  int64_t hwidth;       // floats per column-max line: out_w rounded up to 8
  int64_t padded;       // floats of the padded input row, with room for the last reads
  int64_t cols;         // image columns the outputs read (the rest are never copied)
  int64_t task_floats;  // padded + 3 * hwidth
};

Plan MakePlan(const ConvGeometry& g) {
  Plan p{};
  p.s = g.stride_w;
  p.hwidth = (g.out_w + 7) / 8 * 8;
  // The column maxima of output s read padded columns s * stride .. + 2, and a vector
  // at stride 2 loads sixteen floats from 2 s and from 2 s + 2.
  p.padded = p.s * p.hwidth + 18;
  p.cols = std::clamp<int64_t>((g.out_w - 1) * p.s + 3 - g.pad_left, 0, g.in_w);
  p.task_floats = p.padded + 3 * p.hwidth;
  return p;
}

// h[s] = max of padded row pr at columns s * kS .. s * kS + 2, for s < hwidth.
template <int kS>
[[gnu::always_inline]] inline void ColumnMax(const Plan& p, const float* pr, float* h) {
  for (int64_t s = 0; s < p.hwidth; s += 8) {
    if constexpr (kS == 1) {
      F8 m = NDS_MP_LOAD(pr + s);
      MaxInto(m, NDS_MP_LOAD(pr + s + 1));
      MaxInto(m, NDS_MP_LOAD(pr + s + 2));
      NDS_MP_STORE(h + s, m);
    } else {
      const float* c = pr + 2 * s;
      const F8 a = NDS_MP_LOAD(c), b = NDS_MP_LOAD(c + 8);
      const F8 a2 = NDS_MP_LOAD(c + 2), b2 = NDS_MP_LOAD(c + 10);
      F8 m = __builtin_shuffle(a, b, I8{0, 2, 4, 6, 8, 10, 12, 14});
      MaxInto(m, __builtin_shuffle(a, b, I8{1, 3, 5, 7, 9, 11, 13, 15}));
      MaxInto(m, __builtin_shuffle(a2, b2, I8{0, 2, 4, 6, 8, 10, 12, 14}));
      NDS_MP_STORE(h + s, m);
    }
  }
}

// y[0 .. len) = max of h0, h1, h2 at each column.
[[gnu::always_inline]] inline void RowMax(const float* h0, const float* h1, const float* h2,
                                          int64_t len, float* y) {
  auto at = [&](int64_t s, float* dst) {
    F8 m = NDS_MP_LOAD(h0 + s);
    MaxInto(m, NDS_MP_LOAD(h1 + s));
    MaxInto(m, NDS_MP_LOAD(h2 + s));
    NDS_MP_STORE(dst, m);
  };
  if (len >= 8) {
    int64_t s = 0;
    for (; s + 8 <= len; s += 8) at(s, y + s);
    if (s < len) at(len - 8, y + len - 8);  // overlapping the vector before
  } else {
    float v[8];
    at(0, v);
    for (int64_t i = 0; i < len; ++i) y[i] = v[i];
  }
}

template <int kS>
[[gnu::always_inline]] inline void PlanesStride(const ConvGeometry& g, const Plan& p,
                                                const float* x, const float* neg, int64_t pl0,
                                                int64_t pl1, float* buf, float* y) {
  float* pr = buf;  // the padded row: -inf, then the image columns at pad_left, then -inf
  float* lines = buf + p.padded;
  for (int64_t pl = pl0; pl < pl1; ++pl) {
    const float* xp = x + pl * g.in_plane();
    float* yp = y + pl * g.out_plane();
    const float* h[3];  // padded row t's column maxima sit in slot t % 3
    int64_t next = 0;   // the next padded row to take
    for (int64_t r = 0; r < g.out_h; ++r) {
      for (; next <= r * kS + 2; ++next) {
        const int64_t slot = next % 3, ih = next - g.pad_top;
        if (ih < 0 || ih >= g.in_h) {
          h[slot] = neg;
          continue;
        }
        std::copy(xp + ih * g.in_w, xp + ih * g.in_w + p.cols, pr + g.pad_left);
        float* line = lines + slot * p.hwidth;
        ColumnMax<kS>(p, pr, line);
        h[slot] = line;
      }
      const int first = static_cast<int>((r * kS) % 3);
      RowMax(h[first], h[(first + 1) % 3], h[(first + 2) % 3], g.out_w, yp + r * g.out_w);
    }
  }
}

// One task's planes [pl0, pl1) with `buf` (p.task_floats) as its working space.
NDS_CPU_CLONES
void Planes(const ConvGeometry& g, const Plan& p, const float* x, const float* neg,
            int64_t pl0, int64_t pl1, float* buf, float* y) {
  std::fill(buf, buf + p.padded, kNegInf);
  if (p.s == 1) return PlanesStride<1>(g, p, x, neg, pl0, pl1, buf, y);
  return PlanesStride<2>(g, p, x, neg, pl0, pl1, buf, y);
}

}  // namespace

bool MaxPool3x3Applies(const ConvGeometry& g) {
  return g.IsPlanar() && g.k_h == 3 && g.k_w == 3 && g.dil_h == 1 && g.dil_w == 1 &&
         g.stride_h == g.stride_w && (g.stride_w == 1 || g.stride_w == 2);
}

absl::Status MaxPool3x3(const KernelContext& ctx, const ConvGeometry& g, int64_t planes,
                        const float* x, float* y) {
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError("MaxPool: the kernel context has no scratch allocator");
  }
  const Plan p = MakePlan(g);
  // Blocks of planes, one task and one set of lines each: a few per thread, each about
  // 16K window taps at least.
  const int64_t per_plane = std::max<int64_t>(1, g.out_plane() * 9);
  const int64_t min_planes = std::max<int64_t>(1, (int64_t{16} << 10) / per_plane);
  const int64_t blocks =
      std::clamp<int64_t>(planes / min_planes, 1, std::int64_t{4} * IntraOpThreads());
  NDS_ASSIGN_OR_RETURN(void* mem, ctx.scratch->Allocate(static_cast<std::size_t>(
                                      p.hwidth + blocks * p.task_floats) *
                                  sizeof(float)));
  float* neg = static_cast<float*>(mem);
  std::fill(neg, neg + p.hwidth, kNegInf);
  float* bufs = neg + p.hwidth;
  ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      Planes(g, p, x, neg, blk * planes / blocks, (blk + 1) * planes / blocks,
             bufs + blk * p.task_floats, y);
    }
  });
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
