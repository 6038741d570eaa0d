#ifndef NDSERVE_KERNELS_CPU_MICRO_KERNEL_6X16_H_
#define NDSERVE_KERNELS_CPU_MICRO_KERNEL_6X16_H_

// The 6 x 16 micro-kernel of PackedGemm (B from its packed panels, packed_gemm.cc), the
// direct conv (B rows read in place from the padded image, direct_conv.cc) and the
// Winograd conv (B from its transformed tiles, winograd_conv.cc). Twelve accumulators,
// two B vectors and one broadcast A value: 15 of AVX2's 16 registers, two FMAs per B
// load. Inlined into each caller's NDS_CPU_CLONES function, so it is compiled for AVX2 +
// FMA there.

#include <cstdint>

#include "kernels/cpu/packed_gemm.h"

namespace ndserve::kernels::cpu::micro {

// Eight floats as one value (GCC vector extension), as in row_gemm.cc: an AVX register in
// the x86-64-v3 clone, two SSE registers in the baseline one.
typedef float V8 __attribute__((vector_size(32)));
typedef float V8u __attribute__((vector_size(32), aligned(4), may_alias));

// Only pointers to vectors cross function boundaries (a vector passed by value has
// different ABIs with and without AVX).
inline const V8u* At(const float* p) { return reinterpret_cast<const V8u*>(p); }
inline V8u* At(float* p) { return reinterpret_cast<V8u*>(p); }
// x in every lane: one vbroadcastss from memory. (V8{} + x adds 0.0f first, which is no
// identity for -0.0f, so GCC keeps a scalar add in front of every broadcast: half the
// micro-kernel's speed.)
#define NDS_SPLAT(x) (V8{(x), (x), (x), (x), (x), (x), (x), (x)})

// The 6 x 16 tile c (rows ldc floats apart) = (accumulate ? c : 0) + a panel x B over kb
// rows of K, where brow(k) points at row k's 16 floats.
template <typename BRow>
__attribute__((always_inline)) inline void MicroKernel(int64_t kb, const float* a, BRow brow,
                                                       float* c, int64_t ldc, bool accumulate) {
  V8 c00 = {}, c01 = {}, c10 = {}, c11 = {}, c20 = {}, c21 = {};
  V8 c30 = {}, c31 = {}, c40 = {}, c41 = {}, c50 = {}, c51 = {};
  for (int64_t k = 0; k < kb; ++k, a += kPackMr) {
    const float* b = brow(k);
    const V8 b0 = *At(b), b1 = *At(b + 8);
    V8 v = NDS_SPLAT(a[0]);
    c00 += v * b0;
    c01 += v * b1;
    v = NDS_SPLAT(a[1]);
    c10 += v * b0;
    c11 += v * b1;
    v = NDS_SPLAT(a[2]);
    c20 += v * b0;
    c21 += v * b1;
    v = NDS_SPLAT(a[3]);
    c30 += v * b0;
    c31 += v * b1;
    v = NDS_SPLAT(a[4]);
    c40 += v * b0;
    c41 += v * b1;
    v = NDS_SPLAT(a[5]);
    c50 += v * b0;
    c51 += v * b1;
  }
  if (accumulate) {
    c00 += *At(c), c01 += *At(c + 8);
    c10 += *At(c + ldc), c11 += *At(c + ldc + 8);
    c20 += *At(c + 2 * ldc), c21 += *At(c + 2 * ldc + 8);
    c30 += *At(c + 3 * ldc), c31 += *At(c + 3 * ldc + 8);
    c40 += *At(c + 4 * ldc), c41 += *At(c + 4 * ldc + 8);
    c50 += *At(c + 5 * ldc), c51 += *At(c + 5 * ldc + 8);
  }
  *At(c) = c00, *At(c + 8) = c01;
  *At(c + ldc) = c10, *At(c + ldc + 8) = c11;
  *At(c + 2 * ldc) = c20, *At(c + 2 * ldc + 8) = c21;
  *At(c + 3 * ldc) = c30, *At(c + 3 * ldc + 8) = c31;
  *At(c + 4 * ldc) = c40, *At(c + 4 * ldc + 8) = c41;
  *At(c + 5 * ldc) = c50, *At(c + 5 * ldc + 8) = c51;
}

}  // namespace ndserve::kernels::cpu::micro

#endif  // NDSERVE_KERNELS_CPU_MICRO_KERNEL_6X16_H_
