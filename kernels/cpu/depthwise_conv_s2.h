#ifndef NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_S2_H_
#define NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_S2_H_

// The 3x3 stride-2 depthwise Conv on AVX-512 CPUs, in the planes as they lie: sixteen
// outputs of one row at a time, each of the three input rows they read loaded as 33
// floats and split into evens, odds and evens shifted by one in registers (three
// permutes), then nine multiply-adds. The sixteen-channel loop (depthwise_conv_c16.h)
// transposes every input pixel, four per output at stride 2, and the per-plane row loop
// (depthwise_conv_kxk.h) copies each input row into a ring of even and odd lines and sums
// eight outputs per vector; this one does neither (docs/design.md §4.2). Internal to
// kernels/cpu (depthwise_conv.cc calls it).

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/conv_activation.h"
#include "kernels/conv_geometry.h"

namespace ndserve::kernels::cpu {

// True where DepthwiseS2 can take the conv: the CPU has AVX-512 (PackedGemmUsesAvx512),
// one output per input channel (mg == 1), a 3x3 window at stride 2 on both axes,
// dilation 1, and a top and left padding of at most 2 (any bottom and right). Relu and
// Clip are applied in registers, the other activations after (LateActivationInPlace).
bool DepthwiseS2Applies(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act);

// Where the CPU Conv takes it (depthwise_conv.cc): where it applies and its rows are wide
// enough for the sixteen-wide vectors (out_w >= kDepthwiseS2MinOutW); narrower planes
// keep the sixteen-channel loop, whose vectors are full at any width.
inline constexpr int64_t kDepthwiseS2MinOutW = 14;
bool DepthwiseS2Chosen(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act);

// y [n, c, out_h, out_w] = act(depthwise conv of x [n, c, in_h, in_w] with w [c, 1, 3, 3]
// + bias), bias optional, where DepthwiseS2Applies; FAILED_PRECONDITION elsewhere. Needs
// no working space.
absl::Status DepthwiseS2(const ConvGeometry& g, int64_t n, int64_t c, const float* x,
                         const float* w, const float* bias, const ConvEpilogue& act, float* y);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_S2_H_
