#ifndef NDSERVE_KERNELS_ATTRS_CONV_H_
#define NDSERVE_KERNELS_ATTRS_CONV_H_

// Attribute structs of the convolution, pooling, normalization and resizing ops.
// Plain values; see op_attrs.h for the conventions.

#include <cstdint>
#include <vector>

#include "memory/dtype.h"

namespace ndserve::kernels {}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ATTRS_CONV_H_
