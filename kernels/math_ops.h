#ifndef NDSERVE_KERNELS_MATH_OPS_H_
#define NDSERVE_KERNELS_MATH_OPS_H_

// Scalar functors of the math family's elementwise ops (unary math and activations,
// PRelu, Pow, Min/Max, comparisons, logic, Where), shared by the CPU loops and the CUDA
// kernels so both devices define edge cases (NaN, integer overflow, min > max) the same
// way. Plain C++17 (nvcc compiles it). BOOL elements are bytes: any nonzero byte reads as
// true, results are 0 or 1. Stateless or plain values; thread-safe.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/elementwise_ops.h"  // NDS_HD_OP

namespace ndserve::kernels {

// --- Unary FP32 math ----------------------------------------------------------------------
struct SqrtOp {
  NDS_HD_OP float operator()(float x) const { return sqrtf(x); }
};
struct ExpOp {
  NDS_HD_OP float operator()(float x) const { return expf(x); }
};
struct LogOp {
  NDS_HD_OP float operator()(float x) const { return logf(x); }
};
struct ReciprocalOp {
  NDS_HD_OP float operator()(float x) const { return 1.0f / x; }
};
struct FloorOp {
  NDS_HD_OP float operator()(float x) const { return floorf(x); }
};
struct CeilOp {
  NDS_HD_OP float operator()(float x) const { return ceilf(x); }
};
struct SinOp {
  NDS_HD_OP float operator()(float x) const { return sinf(x); }
};
struct CosOp {
  NDS_HD_OP float operator()(float x) const { return cosf(x); }
};
struct TanOp {
  NDS_HD_OP float operator()(float x) const { return tanf(x); }
};
// NaN outside [-1, 1], as the C library gives it.
struct AsinOp {
  NDS_HD_OP float operator()(float x) const { return asinf(x); }
};
struct AcosOp {
  NDS_HD_OP float operator()(float x) const { return acosf(x); }
};
struct AtanOp {
  NDS_HD_OP float operator()(float x) const { return atanf(x); }
};
// ONNX's Round: halves to even (rintf in the default rounding mode, as numpy's round).
struct RoundOp {
  NDS_HD_OP float operator()(float x) const { return rintf(x); }
};
// log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)): no overflow for large x, and the
// small tail keeps its precision (PyTorch's Softplus with beta 1 exports to it; Mish is
// x * tanh(Softplus(x))).
struct SoftplusOp {
  NDS_HD_OP float operator()(float x) const {
    return (x > 0.0f ? x : 0.0f) + log1pf(expf(-fabsf(x)));
  }
};
// -1, 0 or 1; NaN stays NaN.
struct SignOp {
  template <typename T>
  NDS_HD_OP T operator()(T x) const {
    if constexpr (std::is_integral<T>::value) {
      return static_cast<T>((x > 0) - (x < 0));
    } else {
      return x > 0 ? T(1) : (x < 0 ? T(-1) : x);
    }
  }
};
// Integer negation and absolute value wrap at the type's minimum (as two's complement
// hardware does) instead of being undefined.
struct NegOp {
  template <typename T>
  NDS_HD_OP T operator()(T x) const {
    if constexpr (std::is_integral<T>::value) {
      using U = typename std::make_unsigned<T>::type;
      return static_cast<T>(U(0) - static_cast<U>(x));
    } else {
      return -x;
    }
  }
};
struct AbsOp {
  template <typename T>
  NDS_HD_OP T operator()(T x) const {
    if constexpr (std::is_integral<T>::value) {
      return x < 0 ? NegOp()(x) : x;
    } else {
      return fabsf(x);
    }
  }
};

// --- Activations with attributes (ActivationAttrs, ClipAttrs) -----------------------------
struct LeakyReluOp {
  float alpha;
  NDS_HD_OP float operator()(float x) const { return x < 0.0f ? alpha * x : x; }
};
struct EluOp {
  float alpha;
  NDS_HD_OP float operator()(float x) const { return x < 0.0f ? alpha * expm1f(x) : x; }
};
// Selu: gamma * x above 0, gamma * alpha * (exp(x) - 1) at and below (ActivationAttrs:
// alpha, beta = gamma).
struct SeluOp {
  float alpha, gamma;
  NDS_HD_OP float operator()(float x) const {
    return x > 0.0f ? gamma * x : gamma * (alpha * expm1f(x));
  }
};
// Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
struct CeluOp {
  float alpha;
  NDS_HD_OP float operator()(float x) const {
    return x > 0.0f ? x : alpha * expm1f(x / alpha);
  }
};
// NaN stays NaN: both comparisons are false for it.
struct HardSigmoidOp {
  float alpha, beta;
  NDS_HD_OP float operator()(float x) const {
    const float v = alpha * x + beta;
    return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
  }
};
struct HardSwishOp {
  NDS_HD_OP float operator()(float x) const { return x * HardSigmoidOp{1.0f / 6.0f, 0.5f}(x); }
};
// min(max(x, lo), hi): with lo > hi every element becomes hi; NaN stays NaN.
struct ClipOp {
  float lo, hi;
  NDS_HD_OP float operator()(float x) const {
    const float v = x < lo ? lo : x;
    return v > hi ? hi : v;
  }
};

// --- Binary ---------------------------------------------------------------------------
// PRelu: x where x >= 0, slope * x below.
struct PReluOp {
  NDS_HD_OP float operator()(float x, float slope) const { return x < 0.0f ? slope * x : x; }
};
// FP32 base, FP32 or integer exponent. Evaluated in double and rounded once, as numpy
// does for an integer exponent, so x^2 and friends are exact.
struct PowOp {
  template <typename E>
  NDS_HD_OP float operator()(float base, E exponent) const {
    return static_cast<float>(pow(static_cast<double>(base), static_cast<double>(exponent)));
  }
};
// Mod with fmod 0 (integers only): the remainder takes the divisor's sign, as Python's %
// does. x % 0 is 0 and x % -1 is 0 (MIN % -1 traps in C), so bad input cannot raise
// SIGFPE, nor differ between devices.
struct ModOp {
  template <typename T>
  NDS_HD_OP T operator()(T a, T b) const {
    if (b == 0 || b == T(-1)) return T(0);
    const T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(r + b) : r;
  }
};
// Mod with fmod 1: the remainder takes the dividend's sign (C's fmod; for floats
// fmod(x, 0) is NaN, as IEEE and numpy give).
struct FmodOp {
  template <typename T>
  NDS_HD_OP T operator()(T a, T b) const {
    if constexpr (std::is_integral<T>::value) {
      return (b == 0 || b == T(-1)) ? T(0) : static_cast<T>(a % b);
    } else {
      return fmodf(a, b);
    }
  }
};
// Min and Max propagate NaN (numpy's minimum/maximum).
struct MinOp {
  template <typename T>
  NDS_HD_OP T operator()(T a, T b) const {
    return (a != a || a < b) ? a : b;
  }
};
struct MaxOp {
  template <typename T>
  NDS_HD_OP T operator()(T a, T b) const {
    return (a != a || a > b) ? a : b;
  }
};
struct EqualOp {
  template <typename T>
  NDS_HD_OP uint8_t operator()(T a, T b) const {
    return a == b;
  }
};
struct LessOp {
  template <typename T>
  NDS_HD_OP uint8_t operator()(T a, T b) const {
    return a < b;
  }
};
struct GreaterOp {
  template <typename T>
  NDS_HD_OP uint8_t operator()(T a, T b) const {
    return a > b;
  }
};
struct LessOrEqualOp {
  template <typename T>
  NDS_HD_OP uint8_t operator()(T a, T b) const {
    return a <= b;
  }
};
struct GreaterOrEqualOp {
  template <typename T>
  NDS_HD_OP uint8_t operator()(T a, T b) const {
    return a >= b;
  }
};
struct IsNaNOp {
  NDS_HD_OP uint8_t operator()(float x) const { return x != x; }
};
// IsInf with detect_negative / detect_positive.
struct IsInfOp {
  bool negative, positive;
  NDS_HD_OP uint8_t operator()(float x) const {
    return (positive && x == INFINITY) || (negative && x == -INFINITY);
  }
};
struct AndOp {
  NDS_HD_OP uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) & (b != 0); }
};
struct OrOp {
  NDS_HD_OP uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) | (b != 0); }
};
struct XorOp {
  NDS_HD_OP uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) != (b != 0); }
};
struct NotOp {
  NDS_HD_OP uint8_t operator()(uint8_t a) const { return a == 0; }
};
// Equal on BOOL compares truth values, not bytes.
struct BoolEqualOp {
  NDS_HD_OP uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) == (b != 0); }
};

// ReduceL2, ReduceSumSquare, ReduceLogSumExp, ReduceProd and ReduceL1 of one output: its
// n values get(0) .. get(n - 1), folded in that order on both devices so they round
// alike. LogSumExp subtracts the values' max before exp (no overflow) and gives the max
// itself when that is infinite or NaN; an empty reduction gives 0, 0, -inf, 1 and 0.
enum class FoldReduce : int { kL2, kSumSquare, kLogSumExp, kProd, kL1 };

// a * b for INT32/INT64 with two's-complement wraparound instead of signed overflow (UB).
template <typename T>
NDS_HD_OP T WrappingMul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
template <typename T>
NDS_HD_OP T WrappingAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
struct WrappingSumOp {
  template <typename T>
  NDS_HD_OP T operator()(T a, T b) const {
    return WrappingAdd(a, b);
  }
};
struct WrappingProdOp {
  template <typename T>
  NDS_HD_OP T operator()(T a, T b) const {
    return WrappingMul(a, b);
  }
};
template <typename Get>
NDS_HD_OP float FoldReduceValues(FoldReduce kind, int64_t n, const Get& get) {
  if (kind == FoldReduce::kProd) {
    float p = 1.0f;
    for (int64_t r = 0; r < n; ++r) p *= get(r);
    return p;
  }
  if (kind == FoldReduce::kL1) {
    float s = 0.0f;
    for (int64_t r = 0; r < n; ++r) s += fabsf(get(r));
    return s;
  }
  if (kind == FoldReduce::kLogSumExp) {
    float m = -INFINITY;
    for (int64_t r = 0; r < n; ++r) m = MaxOp()(m, get(r));
    if (!(m > -INFINITY && m < INFINITY)) return m;
    float s = 0.0f;
    for (int64_t r = 0; r < n; ++r) s += expf(get(r) - m);
    return m + logf(s);
  }
  float s = 0.0f;
  for (int64_t r = 0; r < n; ++r) {
    const float v = get(r);
    s += v * v;
  }
  return kind == FoldReduce::kL2 ? sqrtf(s) : s;
}

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_MATH_OPS_H_
