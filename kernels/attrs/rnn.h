#ifndef NDSERVE_KERNELS_ATTRS_RNN_H_
#define NDSERVE_KERNELS_ATTRS_RNN_H_

// Attribute structs of the recurrent ops (LSTM, GRU, RNN) and Einsum.
// Plain values; see op_attrs.h for the conventions.

#include <cstdint>
#include <vector>

#include "memory/dtype.h"

namespace ndserve::kernels {}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ATTRS_RNN_H_
