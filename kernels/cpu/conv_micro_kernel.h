#ifndef NDSERVE_KERNELS_CPU_CONV_MICRO_KERNEL_H_
#define NDSERVE_KERNELS_CPU_CONV_MICRO_KERNEL_H_

// PackedGemm's 6 x 16 micro-kernel for the convs that lay out B themselves: the direct
// conv reads row k of B in place from the padded image (direct_conv.cc), the Winograd
// conv from its transformed tiles (winograd_conv.cc). Inlined into each caller's
// NDS_CPU_CLONES function, so it is compiled for AVX2 + FMA there.

#include <cstdint>

#include "kernels/cpu/packed_gemm.h"

namespace ndserve::kernels::cpu::conv_micro {

typedef float V8 __attribute__((vector_size(32)));
typedef float V8u __attribute__((vector_size(32), aligned(4), may_alias));

inline const V8u* At(const float* p) { return reinterpret_cast<const V8u*>(p); }
inline V8u* At(float* p) { return reinterpret_cast<V8u*>(p); }
// One vbroadcastss (see packed_gemm.cc on why not V8{} + x).
#define NDS_SPLAT(x) (V8{(x), (x), (x), (x), (x), (x), (x), (x)})

// The 6 x 16 tile c (rows 16 floats apart) = (accumulate ? c : 0) + a panel x B over kb
// rows of K, where brow(k) points at row k's 16 floats.
template <typename BRow>
__attribute__((always_inline)) inline void MicroKernel(int64_t kb, const float* a, BRow brow,
                                                       float* c, bool accumulate) {
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
    c00 += *At(c), c01 += *At(c + 8), c10 += *At(c + 16), c11 += *At(c + 24);
    c20 += *At(c + 32), c21 += *At(c + 40), c30 += *At(c + 48), c31 += *At(c + 56);
    c40 += *At(c + 64), c41 += *At(c + 72), c50 += *At(c + 80), c51 += *At(c + 88);
  }
  *At(c) = c00, *At(c + 8) = c01, *At(c + 16) = c10, *At(c + 24) = c11;
  *At(c + 32) = c20, *At(c + 40) = c21, *At(c + 48) = c30, *At(c + 56) = c31;
  *At(c + 64) = c40, *At(c + 72) = c41, *At(c + 80) = c50, *At(c + 88) = c51;
}

}  // namespace ndserve::kernels::cpu::conv_micro

#endif  // NDSERVE_KERNELS_CPU_CONV_MICRO_KERNEL_H_
