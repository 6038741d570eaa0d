#ifndef NDSERVE_KERNELS_ATTRS_MATH_H_
#define NDSERVE_KERNELS_ATTRS_MATH_H_

// Attribute structs of the elementwise math, comparison and logic ops, reductions with attributes, TopK/ArgMax.
// Plain values; see op_attrs.h for the conventions.

#include <cstdint>
#include <vector>

#include "memory/dtype.h"

namespace ndserve::kernels {}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ATTRS_MATH_H_
