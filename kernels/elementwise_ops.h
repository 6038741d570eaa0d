#ifndef NDSERVE_KERNELS_ELEMENTWISE_OPS_H_
#define NDSERVE_KERNELS_ELEMENTWISE_OPS_H_

// Scalar functors of the elementwise ops, shared by the CPU loops and the CUDA kernels so
// both devices define edge cases the same way. Plain C++17 (nvcc compiles it).

#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define NDS_HD_OP __host__ __device__ __forceinline__
#else
#define NDS_HD_OP inline
#endif

namespace ndserve::kernels {

struct AddOp {
  template <typename T>
  NDS_HD_OP T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      // Signed overflow wraps (as onnxruntime does in practice) instead of being UB.
      using U = typename std::make_unsigned<T>::type;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};
struct SubOp {
  template <typename T>
  NDS_HD_OP T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      using U = typename std::make_unsigned<T>::type;
      return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    } else {
      return a - b;
    }
  }
};
struct MulOp {
  template <typename T>
  NDS_HD_OP T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      using U = typename std::make_unsigned<T>::type;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};
// Integer division truncates toward zero. x / 0 is defined as 0 and MIN / -1 wraps, so
// bad input cannot raise SIGFPE on the CPU (nor differ between devices).
struct DivOp {
  template <typename T>
  NDS_HD_OP T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      using U = typename std::make_unsigned<T>::type;
      if (b == 0) return T(0);
      if (b == T(-1)) return static_cast<T>(U(0) - static_cast<U>(a));
      return a / b;
    } else {
      return a / b;
    }
  }
};

// Keeps NaN (x < 0 is false for NaN).
struct ReluOp {
  NDS_HD_OP float operator()(float x) const { return x < 0.0f ? 0.0f : x; }
};
// exp(x) for x <= 0 (a softmax's x - max), within ~2 ulp of libm; 0 below -87 (where
// exp is under FLT_MIN), NaN stays NaN. Branch-free, so the host loops calling it
// vectorize (libm's expf is a call per element): x = n ln2 + r with |r| <= ln2 / 2,
// exp(r) by its Taylor series to r^6, times 2^n built in the exponent bits.
NDS_HD_OP float HostExpNonPositive(float x) {
  constexpr float kLow = -87.0f;
  const float c = x < kLow ? kLow : x;
  // Round to nearest by adding and removing 1.5 * 2^23 (no rounding instruction needed).
  constexpr float kRound = 12582912.0f;
  const float n = (c * 1.44269504f + kRound) - kRound;
  const float r = (c - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int bits = (static_cast<int>(n) + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof(scale));
  return x < kLow ? 0.0f : p * scale;
}

// 1 / (1 + exp(-x)) from HostExpNonPositive of -|x|, so no exp overflows; within a few
// ulp of the libm form. On the host the Sigmoid node, a conv's fused Sigmoid and the
// recurrent kernels' gates use it: vectorized, where expf made efficientnet_b0's Sigmoid
// nodes half its run. A node's and a fused conv's outputs go through one loop
// (kernels/cpu/late_activation.h), so both give the same bits. On the GPU, CUDA's expf.
NDS_HD_OP float HostSigmoid(float x) {
  const float e = HostExpNonPositive(-fabsf(x));
  const float r = 1.0f / (1.0f + e);
  return x < 0.0f ? e * r : r;
}

struct SigmoidOp {
  NDS_HD_OP float operator()(float x) const {
#if defined(__CUDA_ARCH__)
    return 1.0f / (1.0f + expf(-x));
#else
    return HostSigmoid(x);
#endif
  }
};
struct TanhOp {
  NDS_HD_OP float operator()(float x) const { return tanhf(x); }
};
// On the host, erf as a rational function x P(x^2) / Q(x^2) fitted on [0, 4] (|error| <
// 4e-7, against libm's ~1e-7), because libm's erff is a call per element that the loops
// cannot vectorize, and the erf GELU of every transformer spends most of its time there.
// Branch-free (the clamps become min/max), so the loops calling it vectorize; NaN stays
// NaN. Past |x| = 4, erf is 1 to float precision. On the GPU, CUDA's erff.
NDS_HD_OP float HostErf(float x) {
  const float c = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);
  const float t = c * c;
  float p = 1.902938074e-08f;
  p = p * t - 1.961839189e-06f;
  p = p * t + 1.524004037e-04f;
  p = p * t + 4.207884427e-03f;
  p = p * t + 5.223799124e-02f;
  p = p * t + 2.122806013e-01f;
  p = p * t + 1.128378749e+00f;
  float q = 1.073077088e-03f;
  q = q * t + 1.540792268e-02f;
  q = q * t + 1.201293096e-01f;
  q = q * t + 5.214582682e-01f;
  q = q * t + 1.0f;
  const float r = c * p / q;
  return r < -1.0f ? -1.0f : (r > 1.0f ? 1.0f : r);
}

struct ErfOp {
  NDS_HD_OP float operator()(float x) const {
#if defined(__CUDA_ARCH__)
    return erff(x);
#else
    return HostErf(x);
#endif
  }
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ELEMENTWISE_OPS_H_
