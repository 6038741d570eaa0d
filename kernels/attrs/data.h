#ifndef NDSERVE_KERNELS_ATTRS_DATA_H_
#define NDSERVE_KERNELS_ATTRS_DATA_H_

// Attribute structs of the shape arithmetic and data movement ops (Shape, Slice, Expand, Pad, Where, ...).
// Plain values; see op_attrs.h for the conventions.

#include <cstdint>
#include <vector>

#include "memory/dtype.h"

namespace ndserve::kernels {}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ATTRS_DATA_H_
