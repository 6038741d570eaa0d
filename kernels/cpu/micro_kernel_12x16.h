#ifndef NDSERVE_KERNELS_CPU_MICRO_KERNEL_12X16_H_
#define NDSERVE_KERNELS_CPU_MICRO_KERNEL_12X16_H_

// PackedGemm's AVX-512 micro-kernel: the 12 x 16 tile of two consecutive 6-row A panels
// against one 16-wide B panel, so the packed layouts stay those of micro_kernel_6x16.h.
// Twelve 16-wide accumulators, one B load and twelve FMAs with an embedded broadcast of
// A per k: half the instructions and loads per multiply-add of the 6 x 16 AVX2 kernel,
// and each B panel is read once per 12 rows of C instead of 6 (docs/design.md §4.4).
// Only for functions compiled with target("arch=x86-64-v4") (packed_gemm.cc picks that
// one at load when the CPU has AVX-512); elsewhere the 64-byte vectors would be split.

#include <cstdint>

#include "kernels/cpu/micro_kernel_6x16.h"
#include "kernels/cpu/packed_gemm.h"

namespace ndserve::kernels::cpu::micro {

typedef float V16 __attribute__((vector_size(64)));
typedef float V16u __attribute__((vector_size(64), aligned(4), may_alias));

inline const V16u* At16(const float* p) { return reinterpret_cast<const V16u*>(p); }
// As NDS_SPLAT: written out, so GCC folds it into the FMA's {1to16} memory operand.
#define NDS_SPLAT16(x) \
  (V16{(x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x)})

// StoreTile's 12 x 16 form: row r in c<r>, at c + r * ldc. `f`'s bias holds 12 rows.
__attribute__((always_inline)) inline void StoreTile12(float* c, int64_t ldc, bool accumulate,
                                                       const TileFinish* f, V16& c0, V16& c1,
                                                       V16& c2, V16& c3, V16& c4, V16& c5,
                                                       V16& c6, V16& c7, V16& c8, V16& c9,
                                                       V16& c10, V16& c11) {
  auto rows = [&](auto op) {
    op(c0, 0, 0), op(c1, 1, 0), op(c2, 2, 0), op(c3, 3, 0), op(c4, 4, 0), op(c5, 5, 0);
    op(c6, 6, 0), op(c7, 7, 0), op(c8, 8, 0), op(c9, 9, 0), op(c10, 10, 0), op(c11, 11, 0);
  };
  if (accumulate) {
    rows([&](V16& v, int r, int) { v += *At16(c + r * ldc); });
  }
  if (f != nullptr) FinishTile<V16>(f, rows);
  rows([&](V16& v, int r, int) { __builtin_memcpy(c + r * ldc, &v, sizeof(V16)); });
}

// The 12 x 16 tile c = finish((accumulate ? c : 0) + [a0; a1] x B over kb rows of K),
// a0 and a1 two 6-row A panels, b the B panel (row k at b + k * kPackNr). The sums are
// the 6 x 16 kernel's, in the same order, so either kernel gives the same bits.
__attribute__((always_inline)) inline void MicroKernel12x16(int64_t kb, const float* a0,
                                                            const float* a1, const float* b,
                                                            float* c, int64_t ldc,
                                                            bool accumulate,
                                                            const TileFinish* f) {
  V16 c0 = {}, c1 = {}, c2 = {}, c3 = {}, c4 = {}, c5 = {};
  V16 c6 = {}, c7 = {}, c8 = {}, c9 = {}, c10 = {}, c11 = {};
  for (int64_t k = 0; k < kb; ++k, a0 += kPackMr, a1 += kPackMr, b += kPackNr) {
    const V16 bv = *At16(b);
    c0 += NDS_SPLAT16(a0[0]) * bv;
    c1 += NDS_SPLAT16(a0[1]) * bv;
    c2 += NDS_SPLAT16(a0[2]) * bv;
    c3 += NDS_SPLAT16(a0[3]) * bv;
    c4 += NDS_SPLAT16(a0[4]) * bv;
    c5 += NDS_SPLAT16(a0[5]) * bv;
    c6 += NDS_SPLAT16(a1[0]) * bv;
    c7 += NDS_SPLAT16(a1[1]) * bv;
    c8 += NDS_SPLAT16(a1[2]) * bv;
    c9 += NDS_SPLAT16(a1[3]) * bv;
    c10 += NDS_SPLAT16(a1[4]) * bv;
    c11 += NDS_SPLAT16(a1[5]) * bv;
  }
  StoreTile12(c, ldc, accumulate, f, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11);
}

}  // namespace ndserve::kernels::cpu::micro

#endif  // NDSERVE_KERNELS_CPU_MICRO_KERNEL_12X16_H_
