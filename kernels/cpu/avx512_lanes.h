#ifndef NDSERVE_KERNELS_CPU_AVX512_LANES_H_
#define NDSERVE_KERNELS_CPU_AVX512_LANES_H_

// Small AVX-512 helpers the depthwise loops share (depthwise_conv_c16.cc,
// depthwise_conv_in_plane.cc): a mask of a vector's first lanes, and the fused Relu and Clip
// on sixteen sums. Only for functions compiled with target("arch=x86-64-v4"), into which
// they inline; x86-64 only. Internal to kernels/cpu.

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>

#define NDS_AVX512_INLINE __attribute__((target("arch=x86-64-v4"), always_inline)) inline

namespace ndserve::kernels::cpu::avx512 {

// Lanes [0, count) of sixteen: none for count <= 0, all for count >= 16.
NDS_AVX512_INLINE __mmask16 FirstLanes(int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1);
}

// The activations applied in registers; the others run after the store
// (LateActivationInPlace, late_activation.h).
enum class Act { kNone, kRelu, kClip };

template <Act kAct>
NDS_AVX512_INLINE __m512 Activate(__m512 v, __m512 lo, __m512 hi) {
  // max(lo, v) is lo > v ? lo : v and min(hi, v) is hi < v ? hi : v: a NaN sum passes
  // through, as ReluOp and ClipOp let it.
  if constexpr (kAct == Act::kRelu) return _mm512_max_ps(_mm512_setzero_ps(), v);
  if constexpr (kAct == Act::kClip) return _mm512_min_ps(hi, _mm512_max_ps(lo, v));
  return v;
}

}  // namespace ndserve::kernels::cpu::avx512

#endif  // defined(__x86_64__)

#endif  // NDSERVE_KERNELS_CPU_AVX512_LANES_H_
