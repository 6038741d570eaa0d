#ifndef NDSERVE_KERNELS_ATTRS_MATH_H_
#define NDSERVE_KERNELS_ATTRS_MATH_H_

// Attribute structs of the elementwise math, comparison and logic ops, reductions with
// attributes, TopK/ArgMax.
// Plain values; see op_attrs.h for the conventions.

#include <cstdint>
#include <limits>
#include <vector>

#include "memory/dtype.h"

namespace ndserve::kernels {

// The scalar parameters of the parameterized activations. LeakyRelu: alpha is the
// negative slope. Elu: alpha scales exp(x) - 1 below 0. Selu: alpha and gamma (as beta).
// Celu: alpha. HardSigmoid and HardSwish:
// max(0, min(1, alpha * x + beta)) (HardSwish has no attributes; its rule sets 1/6, 1/2).
struct ActivationAttrs {
  float alpha = 0.0f;
  float beta = 0.0f;
};

// IsInf's detect_negative and detect_positive (IsNaN has no attributes and uses it too,
// both set).
struct FloatClassAttrs {
  bool negative = true;
  bool positive = true;
};

// Mod: fmod 0 is the integer remainder with the divisor's sign (Python's %, PyTorch's
// remainder); fmod 1 truncates, the remainder with the dividend's sign (C's fmod).
struct ModAttrs {
  bool fmod = false;
};

// Clip's bounds, folded from its optional host inputs 1 (min) and 2 (max); an absent
// bound is infinite. min > max gives max everywhere, as ONNX's reference does.
struct ClipAttrs {
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();
};

// ArgMax along `axis`; ties go to the first occurrence unless select_last_index.
// ArgMax, and ArgMin with largest false.
struct ArgMaxAttrs {
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last_index = false;
  bool largest = true;
};

// TopK's K (host input 1) and attributes. The kernels always return the K elements sorted
// (best first; equal values by lower index), which satisfies sorted = 0 too.
struct TopKAttrs {
  int64_t k = 0;
  int64_t axis = -1;
  bool largest = true;
  bool sorted = true;
};

// CumSum's axis (host input 1) and attributes.
struct CumSumAttrs {
  int64_t axis = 0;
  bool exclusive = false;
  bool reverse = false;
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ATTRS_MATH_H_
