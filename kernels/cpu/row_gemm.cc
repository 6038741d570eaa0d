#include "kernels/cpu/row_gemm.h"

#include <cstring>

// On x86-64 the loop is also compiled for AVX2 + FMA and picked at load time (GCC's
// function multiversioning); the kernels are otherwise built for the baseline ISA.
#if defined(__x86_64__)
#define NDS_ROW_GEMM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define NDS_ROW_GEMM_CLONES
#endif

namespace ndserve::kernels::cpu {
namespace {

// Eight floats as one value (GCC vector extension): an AVX register in the x86-64-v3
// clone, two SSE registers otherwise. Sums held in named vectors stay in registers; a
// float array of sums was kept on the stack, a store and reload per multiply-add.
typedef float V8 __attribute__((vector_size(32)));
constexpr int64_t kV = 8;

inline V8 Load(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline void Store(float* p, V8 v) { std::memcpy(p, &v, sizeof(v)); }

}  // namespace

NDS_ROW_GEMM_CLONES
void RowGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
             int64_t ldb, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    const float* ai = a + i * lda;
    float* ci = c + i * ldc;
    int64_t j = 0;
    // 64 columns at a time: eight independent sums, enough to cover a multiply-add's
    // latency with the two FMA units busy; then 32, 8 and single columns.
    for (; j + 8 * kV <= n; j += 8 * kV) {
      V8 s0 = {}, s1 = {}, s2 = {}, s3 = {}, s4 = {}, s5 = {}, s6 = {}, s7 = {};
      const float* bp = b + j;
      for (int64_t p = 0; p < k; ++p, bp += ldb) {
        const V8 av = V8{} + ai[p];
        s0 += av * Load(bp);
        s1 += av * Load(bp + kV);
        s2 += av * Load(bp + 2 * kV);
        s3 += av * Load(bp + 3 * kV);
        s4 += av * Load(bp + 4 * kV);
        s5 += av * Load(bp + 5 * kV);
        s6 += av * Load(bp + 6 * kV);
        s7 += av * Load(bp + 7 * kV);
      }
      Store(ci + j, s0);
      Store(ci + j + kV, s1);
      Store(ci + j + 2 * kV, s2);
      Store(ci + j + 3 * kV, s3);
      Store(ci + j + 4 * kV, s4);
      Store(ci + j + 5 * kV, s5);
      Store(ci + j + 6 * kV, s6);
      Store(ci + j + 7 * kV, s7);
    }
    for (; j + 4 * kV <= n; j += 4 * kV) {
      V8 s0 = {}, s1 = {}, s2 = {}, s3 = {};
      const float* bp = b + j;
      for (int64_t p = 0; p < k; ++p, bp += ldb) {
        const V8 av = V8{} + ai[p];
        s0 += av * Load(bp);
        s1 += av * Load(bp + kV);
        s2 += av * Load(bp + 2 * kV);
        s3 += av * Load(bp + 3 * kV);
      }
      Store(ci + j, s0);
      Store(ci + j + kV, s1);
      Store(ci + j + 2 * kV, s2);
      Store(ci + j + 3 * kV, s3);
    }
    for (; j + kV <= n; j += kV) {
      V8 s0 = {};
      const float* bp = b + j;
      for (int64_t p = 0; p < k; ++p, bp += ldb) s0 += (V8{} + ai[p]) * Load(bp);
      Store(ci + j, s0);
    }
    for (; j < n; ++j) {
      float s = 0.0f;
      for (int64_t p = 0; p < k; ++p) s += ai[p] * b[p * ldb + j];
      ci[j] = s;
    }
  }
}

}  // namespace ndserve::kernels::cpu
