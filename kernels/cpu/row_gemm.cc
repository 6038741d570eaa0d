#include "kernels/cpu/row_gemm.h"

#include "kernels/cpu/isa_clones.h"

namespace ndserve::kernels::cpu {
namespace {

// Eight floats as one value (GCC vector extension): an AVX register in the x86-64-v3
// clone, two SSE registers otherwise. Sums held in named vectors stay in registers; a
// float array of sums was kept on the stack, a store and reload per multiply-add.
typedef float V8 __attribute__((vector_size(32)));
// The same, at any float's alignment and allowed to alias floats: how rows of B and C
// are read and written. Only pointers to vectors cross function boundaries here (a
// vector passed by value has different ABIs with and without AVX).
typedef float V8u __attribute__((vector_size(32), aligned(4), may_alias));
constexpr int64_t kV = 8;

inline const V8u* At(const float* p) { return reinterpret_cast<const V8u*>(p); }
inline V8u* At(float* p) { return reinterpret_cast<V8u*>(p); }
// x in every lane, one broadcast. (V8{} + x would add 0.0f first, which is no identity for
// -0.0f, so GCC keeps a scalar add before each broadcast, on the multiply-add's path.)
#define NDS_SPLAT(x) (V8{(x), (x), (x), (x), (x), (x), (x), (x)})

// Columns [j, n) of one row of C: ci = ai x B.
__attribute__((always_inline)) inline void OneRow(const float* ai, const float* b, int64_t ldb,
                                                  int64_t k, int64_t j, int64_t n, float* ci) {
  // 64 columns at a time: eight independent sums, enough to cover a multiply-add's
  // latency with the two FMA units busy; then 32, 8 and single columns.
  for (; j + 8 * kV <= n; j += 8 * kV) {
    V8 s0 = {}, s1 = {}, s2 = {}, s3 = {}, s4 = {}, s5 = {}, s6 = {}, s7 = {};
    const float* bp = b + j;
    for (int64_t p = 0; p < k; ++p, bp += ldb) {
      const V8 av = NDS_SPLAT(ai[p]);
      s0 += av * *At(bp);
      s1 += av * *At(bp + kV);
      s2 += av * *At(bp + 2 * kV);
      s3 += av * *At(bp + 3 * kV);
      s4 += av * *At(bp + 4 * kV);
      s5 += av * *At(bp + 5 * kV);
      s6 += av * *At(bp + 6 * kV);
      s7 += av * *At(bp + 7 * kV);
    }
    *At(ci + j) = s0;
    *At(ci + j + kV) = s1;
    *At(ci + j + 2 * kV) = s2;
    *At(ci + j + 3 * kV) = s3;
    *At(ci + j + 4 * kV) = s4;
    *At(ci + j + 5 * kV) = s5;
    *At(ci + j + 6 * kV) = s6;
    *At(ci + j + 7 * kV) = s7;
  }
  for (; j + 4 * kV <= n; j += 4 * kV) {
    V8 s0 = {}, s1 = {}, s2 = {}, s3 = {};
    const float* bp = b + j;
    for (int64_t p = 0; p < k; ++p, bp += ldb) {
      const V8 av = NDS_SPLAT(ai[p]);
      s0 += av * *At(bp);
      s1 += av * *At(bp + kV);
      s2 += av * *At(bp + 2 * kV);
      s3 += av * *At(bp + 3 * kV);
    }
    *At(ci + j) = s0;
    *At(ci + j + kV) = s1;
    *At(ci + j + 2 * kV) = s2;
    *At(ci + j + 3 * kV) = s3;
  }
  for (; j + kV <= n; j += kV) {
    V8 s0 = {};
    const float* bp = b + j;
    for (int64_t p = 0; p < k; ++p, bp += ldb) s0 += NDS_SPLAT(ai[p]) * *At(bp);
    *At(ci + j) = s0;
  }
  for (; j < n; ++j) {
    float s = 0.0f;
    for (int64_t p = 0; p < k; ++p) s += ai[p] * b[p * ldb + j];
    ci[j] = s;
  }
}

// R rows by NV vectors of columns of C: R x NV independent sums, each load of B serving
// all R rows. For the columns right of the last 32-wide block: attention's context
// product (P x V, head size 24 or 40) is nothing else, and one row at a time its single
// eight-column sum was one dependent multiply-add chain per row, 14 GFLOP/s
// (docs/design.md section 4). Fully unrolled, the arrays live in registers.
template <int R, int NV>
__attribute__((always_inline)) inline void NarrowBlock(const float* a, int64_t lda, const float* b,
                                                       int64_t ldb, int64_t k, float* c,
                                                       int64_t ldc) {
  V8 s[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) s[r][v] = V8{};
  }
  for (int64_t p = 0; p < k; ++p, b += ldb) {
    V8 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = *At(b + v * kV);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V8 x = NDS_SPLAT(a[r * lda + p]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) s[r][v] += x * bv[v];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) *At(c + r * ldc + v * kV) = s[r][v];
  }
}

// Columns [j, j + 8 NV) of every row, R rows at a time, the last rows one at a time.
template <int R, int NV>
__attribute__((always_inline)) inline void NarrowColumns(int64_t m, int64_t k, const float* a,
                                                         int64_t lda, const float* b,
                                                         int64_t ldb, float* c, int64_t ldc) {
  int64_t i = 0;
  for (; i + R <= m; i += R) NarrowBlock<R, NV>(a + i * lda, lda, b, ldb, k, c + i * ldc, ldc);
  for (; i < m; ++i) NarrowBlock<1, NV>(a + i * lda, lda, b, ldb, k, c + i * ldc, ldc);
}

}  // namespace

NDS_CPU_CLONES
void RowGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
             int64_t ldb, float* c, int64_t ldc) {
  // Columns up to n32 in 32- and 64-wide blocks; the rest, narrower than 32, below.
  const int64_t n32 = n - n % (4 * kV);
  int64_t i = 0;
  // Two rows at a time over 32-column blocks: eight independent sums again, and each
  // load of B serves both rows.
  for (; i + 2 <= m && n32 > 0; i += 2) {
    const float *a0 = a + i * lda, *a1 = a0 + lda;
    float *c0 = c + i * ldc, *c1 = c0 + ldc;
    int64_t j = 0;
    for (; j < n32; j += 4 * kV) {
      V8 s0 = {}, s1 = {}, s2 = {}, s3 = {}, t0 = {}, t1 = {}, t2 = {}, t3 = {};
      const float* bp = b + j;
      for (int64_t p = 0; p < k; ++p, bp += ldb) {
        const V8 b0 = *At(bp), b1 = *At(bp + kV), b2 = *At(bp + 2 * kV), b3 = *At(bp + 3 * kV);
        const V8 x0 = NDS_SPLAT(a0[p]), x1 = NDS_SPLAT(a1[p]);
        s0 += x0 * b0;
        s1 += x0 * b1;
        s2 += x0 * b2;
        s3 += x0 * b3;
        t0 += x1 * b0;
        t1 += x1 * b1;
        t2 += x1 * b2;
        t3 += x1 * b3;
      }
      *At(c0 + j) = s0;
      *At(c0 + j + kV) = s1;
      *At(c0 + j + 2 * kV) = s2;
      *At(c0 + j + 3 * kV) = s3;
      *At(c1 + j) = t0;
      *At(c1 + j + kV) = t1;
      *At(c1 + j + 2 * kV) = t2;
      *At(c1 + j + 3 * kV) = t3;
    }
  }
  if (i < m && n32 > 0) OneRow(a + i * lda, b, ldb, k, 0, n32, c + i * ldc);
  // The narrow rest: up to three vectors of columns over several rows at a time (twelve
  // or eight sums), then single columns.
  int64_t j = n32;
  switch ((n - n32) / kV) {
    case 3:
      NarrowColumns<4, 3>(m, k, a, lda, b + j, ldb, c + j, ldc);
      break;
    case 2:
      NarrowColumns<6, 2>(m, k, a, lda, b + j, ldb, c + j, ldc);
      break;
    case 1:
      NarrowColumns<8, 1>(m, k, a, lda, b + j, ldb, c + j, ldc);
      break;
    default:
      break;
  }
  j += (n - n32) / kV * kV;
  for (int64_t r = 0; r < m && j < n; ++r) OneRow(a + r * lda, b, ldb, k, j, n, c + r * ldc);
}

}  // namespace ndserve::kernels::cpu
