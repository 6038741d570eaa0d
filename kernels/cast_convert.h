#ifndef NDSERVE_KERNELS_CAST_CONVERT_H_
#define NDSERVE_KERNELS_CAST_CONVERT_H_

// Element conversions for Cast, shared by the CPU and CUDA kernels so both devices give
// bit-identical results. Plain C++17 without library dependencies (nvcc compiles it).
//
// Semantics (ONNX leaves out-of-range results undefined; these are defined and never UB):
//  - float -> integer: truncation toward zero, saturating at the type's limits, NaN -> 0.
//  - integer -> integer: two's-complement wrap (C++20 conversion semantics).
//  - anything -> BOOL: x != 0 (NaN -> true); BOOL -> number: 0 or 1.
//  - FP16 / BF16: round to nearest even, overflow to inf, NaN stays NaN.

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define NDS_HD __host__ __device__ __forceinline__
#else
#define NDS_HD inline
#endif

namespace ndserve::kernels {

// Storage types for the 16-bit floats: only the bits; arithmetic goes through float.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

NDS_HD uint32_t FloatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}
NDS_HD float BitsToFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

// Round-to-nearest-even float -> binary16 (F. Giesen's float_to_half_fast3_rtne). Relies
// on IEEE float addition without flush-to-zero, which host code and non-fast-math device
// code have.
NDS_HD Half FloatToHalf(float value) {
  uint32_t f = FloatBits(value);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint16_t out;
  if (f >= (127u + 16u) << 23) {  // >= 65536: inf, or NaN
    out = f > (255u << 23) ? 0x7e00 : 0x7c00;
  } else if (f < (113u << 23)) {  // below 2^-14: subnormal or zero
    const uint32_t magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    const float sum = BitsToFloat(f) + BitsToFloat(magic);
    out = static_cast<uint16_t>(FloatBits(sum) - magic);
  } else {
    const uint32_t mant_odd = (f >> 13) & 1u;
    f += ((15u - 127u) << 23) + 0xfffu;  // rebias the exponent, round half up...
    f += mant_odd;                       // ...or to even
    out = static_cast<uint16_t>(f >> 13);
  }
  return Half{static_cast<uint16_t>(out | (sign >> 16))};
}

NDS_HD float HalfToFloat(Half h) {
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (static_cast<uint32_t>(h.bits) & 0x7fffu) << 13;
  const uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp) {
    o += (128u - 16u) << 23;  // inf / NaN
  } else if (exp == 0) {
    o += 1u << 23;  // zero / subnormal: renormalize
    o = FloatBits(BitsToFloat(o) - BitsToFloat(113u << 23));
  }
  return BitsToFloat(o | ((static_cast<uint32_t>(h.bits) & 0x8000u) << 16));
}

NDS_HD BFloat16 FloatToBFloat16(float value) {
  const uint32_t f = FloatBits(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((f >> 16) | 0x40)};
  const uint32_t rounded = f + 0x7fffu + ((f >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(rounded >> 16)};
}

NDS_HD float BFloat16ToFloat(BFloat16 b) {
  return BitsToFloat(static_cast<uint32_t>(b.bits) << 16);
}

template <typename T>
struct IsHalfLike : std::integral_constant<bool, std::is_same<T, Half>::value ||
                                                     std::is_same<T, BFloat16>::value> {};

// Half-likes are read as float.
template <typename T>
NDS_HD auto Widen(T v) {
  if constexpr (std::is_same<T, Half>::value) {
    return HalfToFloat(v);
  } else if constexpr (std::is_same<T, BFloat16>::value) {
    return BFloat16ToFloat(v);
  } else {
    return v;
  }
}

template <typename To>
NDS_HD To SaturatingFloatToInt(double x) {
  using U = typename std::make_unsigned<To>::type;
  constexpr bool kSigned = std::is_signed<To>::value;
  constexpr int kBits = static_cast<int>(sizeof(To) * 8) - (kSigned ? 1 : 0);
  constexpr To kMax =
      kSigned ? static_cast<To>(static_cast<U>(~U(0)) >> 1) : static_cast<To>(~U(0));
  constexpr To kLowest = kSigned ? static_cast<To>(-kMax - 1) : To(0);
  if (x != x) return To(0);
  // 2^kBits, one past the maximum; powers of two are exact in double.
  double limit = 1.0;
  for (int i = 0; i < kBits; ++i) limit *= 2.0;
  if (x <= (kSigned ? -limit : -1.0)) return kLowest;
  if (x >= limit) return kMax;
  return static_cast<To>(x);
}

// Reads element i; a BOOL byte other than 0 or 1 (bad client data) reads as true instead
// of being undefined behaviour.
template <typename T>
NDS_HD T LoadElement(const T* p, int64_t i) {
  if constexpr (std::is_same<T, bool>::value) {
    return reinterpret_cast<const unsigned char*>(p)[i] != 0;
  } else {
    return p[i];
  }
}

template <typename From, typename To>
NDS_HD To Convert(From from) {
  const auto v = Widen(from);
  using V = decltype(v);
  if constexpr (std::is_same<To, bool>::value) {
    return v != V(0);
  } else if constexpr (std::is_same<To, Half>::value) {
    return FloatToHalf(static_cast<float>(v));
  } else if constexpr (std::is_same<To, BFloat16>::value) {
    return FloatToBFloat16(static_cast<float>(v));
  } else if constexpr (std::is_floating_point<To>::value) {
    return static_cast<To>(v);
  } else if constexpr (std::is_floating_point<V>::value) {
    return SaturatingFloatToInt<To>(static_cast<double>(v));
  } else {
    return static_cast<To>(v);  // integer or bool -> integer: modular
  }
}

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_CAST_CONVERT_H_
