#ifndef NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_H_
#define NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_H_

// The depthwise case of the CPU Conv (one input channel per group, `mg` outputs per
// group): a direct loop rather than a GEMM, whose K would be only kh * kw. Internal to
// kernels/cpu (conv.cc calls it).

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/conv_activation.h"
#include "kernels/conv_geometry.h"
#include "kernels/kernel_context.h"

namespace ndserve::kernels::cpu {

// y [n, c * mg, out_h, out_w] = act(depthwise conv of x [n, c, in_h, in_w] with
// w [c * mg, 1, k_h, k_w] + bias), bias optional. Working space from ctx.scratch
// (RESOURCE_EXHAUSTED when it is spent).
absl::Status DepthwiseConv(const KernelContext& ctx, const ConvGeometry& g, int64_t n, int64_t c,
                           int64_t mg, const float* x, const float* w, const float* bias,
                           const ConvEpilogue& act, float* y);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_H_
