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
struct ErfOp {
  NDS_HD_OP float operator()(float x) const { return erff(x); }
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ELEMENTWISE_OPS_H_
