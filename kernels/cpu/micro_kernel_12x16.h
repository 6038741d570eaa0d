#ifndef NDSERVE_KERNELS_CPU_MICRO_KERNEL_12X16_H_
#define NDSERVE_KERNELS_CPU_MICRO_KERNEL_12X16_H_

// The AVX-512 micro-kernel of PackedGemm and the direct conv: the 12 x 16 tile of two
// consecutive 6-row A panels against one 16-wide B panel, so the packed layouts stay those
// of micro_kernel_6x16.h. Twelve 16-wide accumulators, one B load and twelve FMAs with an
// embedded broadcast of A per k: half the instructions and loads per multiply-add of the
// 6 x 16 AVX2 kernel, and each B panel is read once per 12 rows of C instead of 6
// (docs/design.md §4.4).
// Only for functions compiled with target("arch=x86-64-v4"), which their callers pick
// when PackedGemmUsesAvx512(); elsewhere the 64-byte vectors would be split. (The
// Winograd conv takes it except on Zen 4, where 12-row tiles made resnet18's 3x3
// stride-1 convs 2-9 % slower at batch 1; docs/design.md §4.4.)

#include <cstdint>

#include "kernels/cpu/micro_kernel_6x16.h"
#include "kernels/cpu/packed_gemm.h"

namespace ndserve::kernels::cpu::micro {

typedef float V16 __attribute__((vector_size(64)));

// StoreTile's 12-row form: row r in c<r> (one vector V), at c + r * ldc. `f`'s bias
// holds 12 rows.
template <typename V>
__attribute__((always_inline)) inline void StoreTile12(float* c, int64_t ldc, bool accumulate,
                                                       const TileFinish* f, V& c0, V& c1,
                                                       V& c2, V& c3, V& c4, V& c5, V& c6,
                                                       V& c7, V& c8, V& c9, V& c10, V& c11) {
  auto rows = [&](auto op) __attribute__((always_inline)) {
    op(c0, 0, 0), op(c1, 1, 0), op(c2, 2, 0), op(c3, 3, 0), op(c4, 4, 0), op(c5, 5, 0);
    op(c6, 6, 0), op(c7, 7, 0), op(c8, 8, 0), op(c9, 9, 0), op(c10, 10, 0), op(c11, 11, 0);
  };
  if (accumulate) {
    rows([&](V& v, int r, int) __attribute__((always_inline)) {
      V old;
      __builtin_memcpy(&old, c + r * ldc, sizeof(V));
      v += old;
    });
  }
  if (f != nullptr) FinishTile<V>(f, rows);
  rows([&](V& v, int r, int) __attribute__((always_inline)) { __builtin_memcpy(c + r * ldc, &v, sizeof(V)); });
}

// The 12 x 16 tile c = finish((accumulate ? c : 0) + A x B over kb rows of K), A's twelve
// rows from `a` (PanelA over two 6-row panels, or RowsA), brow(k) B's row k (as
// MicroKernel's), with V = V16; with V = V8 the 12 x 8 tile of the panel's first 8
// columns, so a panel holding at most 8 columns of C (N = 49's last holds one) costs half
// a tile. The sums are the 6 x 16 kernel's, in the same order, so either kernel (and
// either A source) gives the same bits.
template <typename V, typename ASource, typename BRow>
__attribute__((always_inline)) inline void MicroKernel12From(int64_t kb, ASource a, BRow brow,
                                                             float* c, int64_t ldc,
                                                             bool accumulate,
                                                             const TileFinish* f = nullptr) {
  V c0 = {}, c1 = {}, c2 = {}, c3 = {}, c4 = {}, c5 = {};
  V c6 = {}, c7 = {}, c8 = {}, c9 = {}, c10 = {}, c11 = {};
  // `bv * x` broadcasts x with no add in front (see NDS_SPLAT): the FMA's {1toN} operand.
  for (int64_t k = 0; k < kb; ++k, a.next()) {
    V bv;
    __builtin_memcpy(&bv, brow(k), sizeof(V));
    c0 += bv * a.get(0);
    c1 += bv * a.get(1);
    c2 += bv * a.get(2);
    c3 += bv * a.get(3);
    c4 += bv * a.get(4);
    c5 += bv * a.get(5);
    c6 += bv * a.get(6);
    c7 += bv * a.get(7);
    c8 += bv * a.get(8);
    c9 += bv * a.get(9);
    c10 += bv * a.get(10);
    c11 += bv * a.get(11);
  }
  // Copies: the accumulators' own addresses never reach StoreTile12's lambdas, or GCC
  // kept them in memory through the loop with RowsA (a store per FMA).
  V d0 = c0, d1 = c1, d2 = c2, d3 = c3, d4 = c4, d5 = c5;
  V d6 = c6, d7 = c7, d8 = c8, d9 = c9, d10 = c10, d11 = c11;
  StoreTile12(c, ldc, accumulate, f, d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11);
}

// MicroKernel12From with A two packed 6-row panels a0 and a1.
template <typename V, typename BRow>
__attribute__((always_inline)) inline void MicroKernel12(int64_t kb, const float* a0,
                                                         const float* a1, BRow brow, float* c,
                                                         int64_t ldc, bool accumulate,
                                                         const TileFinish* f = nullptr) {
  MicroKernel12From<V>(kb, PanelA{a0, a1}, brow, c, ldc, accumulate, f);
}

}  // namespace ndserve::kernels::cpu::micro

#endif  // NDSERVE_KERNELS_CPU_MICRO_KERNEL_12X16_H_
