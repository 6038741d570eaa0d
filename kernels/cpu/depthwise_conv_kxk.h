#ifndef NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_KXK_H_
#define NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_KXK_H_

// The 3x3 and 5x5 depthwise Conv at stride 1 or 2 without dilation (every depthwise conv
// of mobilenet_v2, mobilenet_v3 and efficientnet): input rows are read a row at a time
// into a ring of K + 2 x stride padded lines instead of a padded copy of the plane, and
// small planes are summed across row boundaries so a 7-wide row still fills vectors
// (docs/design.md §4.2). Internal to kernels/cpu (depthwise_conv.cc calls it).

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/conv_activation.h"
#include "kernels/conv_geometry.h"
#include "kernels/kernel_context.h"

namespace ndserve::kernels::cpu {

// True where DepthwiseKxK takes `g`: a 3x3 or 5x5 window, dilation 1, the same stride
// (1 or 2) on both axes; any padding.
bool DepthwiseKxKApplies(const ConvGeometry& g);

// y [n, c * mg, out_h, out_w] = act(depthwise conv of x [n, c, in_h, in_w] with
// w [c * mg, 1, K, K] + bias), bias optional, for a `g` that DepthwiseKxKApplies to.
// Working space from ctx.scratch (RESOURCE_EXHAUSTED when it is spent).
absl::Status DepthwiseKxK(const KernelContext& ctx, const ConvGeometry& g, int64_t n, int64_t c,
                          int64_t mg, const float* x, const float* w, const float* bias,
                          const ConvEpilogue& act, float* y);

// How many tasks a depthwise conv of `planes` input planes (mg outputs each) splits into,
// each a block of planes with its own working space: a few per thread so uneven blocks
// even out, and each worth handing to another thread (about 16K multiply-adds at least).
// Shared by DepthwiseKxK and the general loop in depthwise_conv.cc.
int64_t DepthwisePlaneBlocks(const ConvGeometry& g, int64_t planes, int64_t mg);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_KXK_H_
