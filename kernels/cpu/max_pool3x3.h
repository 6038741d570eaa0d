#ifndef NDSERVE_KERNELS_CPU_MAX_POOL3X3_H_
#define NDSERVE_KERNELS_CPU_MAX_POOL3X3_H_

// MaxPool over a 3x3 window at stride 1 or 2 without dilation or the indices output
// (resnet's stem pool): the window's max taken in two passes, three columns per input
// row and then three rows per output row (docs/design.md §4.2). Internal to kernels/cpu
// (pool.cc calls it).

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/conv_geometry.h"
#include "kernels/kernel_context.h"

namespace ndserve::kernels::cpu {

// True where MaxPool3x3 takes `g`: a 3x3 window, dilation 1, the same stride (1 or 2) on
// both axes; any padding, ceil_mode's overhang included.
bool MaxPool3x3Applies(const ConvGeometry& g);

// y [planes, out_h, out_w] = the max over each window of x [planes, in_h, in_w], the
// padding taking no part (a window wholly in it gives -inf); a NaN in a window gives
// NaN. Working space from ctx.scratch (RESOURCE_EXHAUSTED when it is spent).
absl::Status MaxPool3x3(const KernelContext& ctx, const ConvGeometry& g, int64_t planes,
                        const float* x, float* y);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_MAX_POOL3X3_H_
