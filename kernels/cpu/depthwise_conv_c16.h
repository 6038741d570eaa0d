#ifndef NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_C16_H_
#define NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_C16_H_

// The 3x3 and 5x5 depthwise Conv on AVX-512 CPUs, sixteen channels per vector: a task
// transposes a block of sixteen input planes (a band of their rows) into pixel-major
// order, so that each 64-byte vector holds one pixel of all sixteen channels, sums every
// output pixel as K * K aligned loads and multiply-adds with the sixteen channels'
// weights held in registers, and transposes the sums back into the sixteen output planes
// (docs/design.md §4.2). Planes of any width fill whole vectors this way; the per-plane
// kernel (depthwise_conv_kxk.h) spends most of a 7x7 or 14x14 plane on set-up and edges.
// Internal to kernels/cpu (depthwise_conv.cc calls it).

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/conv_activation.h"
#include "kernels/conv_geometry.h"
#include "kernels/kernel_context.h"

namespace ndserve::kernels::cpu {

// True where DepthwiseC16 can take the conv: the CPU has AVX-512 (PackedGemmUsesAvx512),
// one output per input channel (mg == 1) and a geometry DepthwiseKxKApplies to. Relu and
// Clip are applied in registers, HardSwish, Sigmoid and SiLU after
// (LateActivationInPlace, late_activation.h).
bool DepthwiseC16Applies(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act);

// Where the CPU Conv takes it (depthwise_conv.cc): where it applies and measured faster
// than the per-plane loop.
bool DepthwiseC16Chosen(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act);

// y [n, c, out_h, out_w] = act(depthwise conv of x [n, c, in_h, in_w] with w [c, 1, K, K]
// + bias), bias optional, where DepthwiseC16Applies. Working space from ctx.scratch
// (RESOURCE_EXHAUSTED when it is spent); FAILED_PRECONDITION where it does not apply.
absl::Status DepthwiseC16(const KernelContext& ctx, const ConvGeometry& g, int64_t n, int64_t c,
                          const float* x, const float* w, const float* bias,
                          const ConvEpilogue& act, float* y);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_C16_H_
