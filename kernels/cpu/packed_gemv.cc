#include "kernels/cpu/packed_gemv.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/parallel.h"

namespace ndserve::kernels::cpu {
namespace {

// Sixteen floats: one register of the AVX-512 clone, two of the AVX2 one, four SSE in the
// baseline. Vectors stay inside one function (their by-value ABI differs between clones).
typedef float V16 __attribute__((vector_size(64)));

// Rows of A in the product: A(r, l) is a.at(r, l), read once per multiply-add row.
template <bool kTrans>
__attribute__((always_inline)) inline float At(const MatrixRef& a, int64_t r, int64_t l) {
  return kTrans ? a.data[l * a.ld + r] : a.data[r * a.ld + l];
}

// Columns [col, col + 16) of C for R rows (R <= kPackedGemvMaxRows): B's panel over every
// K block, then the store of the `cols` valid columns. Each row sums in P chains (k mod
// P), R * P accumulators (4, or 3 at R = 3), so several FMAs are in flight per B vector
// load even at R = 1.
template <int R, bool kTrans>
__attribute__((always_inline)) inline void Panel(const PackedMatrix& b, const MatrixRef& a,
                                                 int64_t k, int64_t col, int64_t cols, float* c,
                                                 int64_t ldc, bool accumulate) {
  constexpr int P = R == 1 ? 4 : (R == 2 ? 2 : 1);
  V16 acc[P][R] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kPackKc) {
    const int64_t kb = std::min(kPackKc, k - k0);
    const float* panel = b.Panel(k0, kb, col);
    int64_t l = 0;
    for (; l + P <= kb; l += P) {
      for (int p = 0; p < P; ++p) {
        V16 bv;
        std::memcpy(&bv, panel + (l + p) * kPackNr, sizeof(bv));
        for (int r = 0; r < R; ++r) acc[p][r] += bv * At<kTrans>(a, r, k0 + l + p);
      }
    }
    for (; l < kb; ++l) {
      V16 bv;
      std::memcpy(&bv, panel + l * kPackNr, sizeof(bv));
      for (int r = 0; r < R; ++r) acc[0][r] += bv * At<kTrans>(a, r, k0 + l);
    }
  }
  for (int r = 0; r < R; ++r) {
    V16 sum = acc[0][r];
    for (int p = 1; p < P; ++p) sum += acc[p][r];
    float out[kPackNr];
    std::memcpy(out, &sum, sizeof(sum));
    float* cr = c + r * ldc + col;
    for (int64_t j = 0; j < cols; ++j) cr[j] = accumulate ? cr[j] + out[j] : out[j];
  }
}

// Inlined, as Panel, into RunPanels's clones: an outlined template is built for the
// baseline only.
template <int R, bool kTrans>
__attribute__((always_inline)) inline void Panels(const PackedMatrix& b, const MatrixRef& a,
                                                  int64_t n, int64_t k, int64_t p0, int64_t p1,
                                                  float* c, int64_t ldc, bool accumulate) {
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t col = p * kPackNr;
    Panel<R, kTrans>(b, a, k, col, std::min(kPackNr, n - col), c, ldc, accumulate);
  }
}

// Panels [p0, p1) of C, for this CPU's widest clone.
NDS_CPU_CLONES_V4
void RunPanels(const PackedMatrix& b, const MatrixRef& a, int64_t m, int64_t n, int64_t k,
               int64_t p0, int64_t p1, float* c, int64_t ldc, bool accumulate) {
  // No lambda here: its body would be a function of its own, built for the baseline.
#define NDS_GEMV_ROWS(R)                                                   \
  return a.trans ? Panels<R, true>(b, a, n, k, p0, p1, c, ldc, accumulate) \
                 : Panels<R, false>(b, a, n, k, p0, p1, c, ldc, accumulate)
  switch (m) {
    case 1:
      NDS_GEMV_ROWS(1);
    case 2:
      NDS_GEMV_ROWS(2);
    case 3:
      NDS_GEMV_ROWS(3);
    default:
      NDS_GEMV_ROWS(4);
  }
#undef NDS_GEMV_ROWS
}

// A task of fewer multiply-adds runs on the caller: waking the pool costs about 10 us.
constexpr int64_t kMinTaskMacs = int64_t{1} << 18;

std::atomic<uint64_t> gemv_calls{0};

}  // namespace

uint64_t PackedGemvCalls() { return gemv_calls.load(std::memory_order_relaxed); }

void PackedGemv(const PackedMatrix& b, MatrixRef a, int64_t m, int64_t n, int64_t k, float* c,
                int64_t ldc, bool accumulate, PackedEpilogue epilogue) {
  gemv_calls.fetch_add(1, std::memory_order_relaxed);
  const int64_t panels = (n + kPackNr - 1) / kPackNr;
  const int64_t panel_macs = m * kPackNr * k;
  ParallelFor(panels, std::max<int64_t>(1, kMinTaskMacs / panel_macs), [&](int64_t p0, int64_t p1) {
    RunPanels(b, a, m, n, k, p0, p1, c, ldc, accumulate);
    epilogue(0, m, p0 * kPackNr, std::min(n, p1 * kPackNr));
  });
}

}  // namespace ndserve::kernels::cpu
