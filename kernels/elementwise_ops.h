#ifndef NDSERVE_KERNELS_ELEMENTWISE_OPS_H_
#define NDSERVE_KERNELS_ELEMENTWISE_OPS_H_

// Scalar functors of the elementwise ops, shared by the CPU loops and the CUDA kernels so
// both devices define edge cases the same way. Plain C++17 (nvcc compiles it).

#include <cmath>
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
struct SigmoidOp {
  NDS_HD_OP float operator()(float x) const { return 1.0f / (1.0f + expf(-x)); }
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
