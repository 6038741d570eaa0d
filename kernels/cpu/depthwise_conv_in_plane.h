#ifndef NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_IN_PLANE_H_
#define NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_IN_PLANE_H_

// The 3x3 depthwise Conv at stride 1 or 2 on AVX-512 CPUs, in the planes as they lie:
// sixteen outputs of one row per vector. Each input row those outputs read is loaded as
// two vectors (32 floats) and turned into the three taps' operands in registers: at
// stride 1 the row and the row shifted by one and by two lanes (two lane shifts), at
// stride 2 its evens, its odds and its evens shifted by one (three permutes). The
// sixteen-channel loop (depthwise_conv_c16.h) transposes every input pixel in and every
// output pixel out, and the per-plane row loop (depthwise_conv_kxk.h) copies each input
// row into a ring and sums eight outputs per vector; this one does neither
// (docs/design.md §4.2). Internal to kernels/cpu (depthwise_conv.cc calls it).

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/conv_activation.h"
#include "kernels/conv_geometry.h"

namespace ndserve::kernels::cpu {

// True where DepthwiseInPlane can take the conv: the CPU has AVX-512
// (PackedGemmUsesAvx512), one output per input channel (mg == 1), a 3x3 window at stride
// 1 or 2 (the same on both axes), dilation 1, and a top and left padding of at most 2
// (any bottom and right). Relu and Clip are applied in registers, the other activations
// after (LateActivationInPlace).
bool DepthwiseInPlaneApplies(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act);

// Where the CPU Conv takes it (depthwise_conv.cc): where it applies and the input rows
// are kDepthwiseInPlaneMinInW floats or more. Narrower planes keep the sixteen-channel
// loop, whose vectors are full at any width (14-wide rows at stride 1 were a tie, 7-wide
// ones mostly lanes of nothing).
inline constexpr int64_t kDepthwiseInPlaneMinInW = 28;
bool DepthwiseInPlaneChosen(const ConvGeometry& g, int64_t mg, const ConvEpilogue& act);

// y [n, c, out_h, out_w] = act(depthwise conv of x [n, c, in_h, in_w] with w [c, 1, 3, 3]
// + bias), bias optional, where DepthwiseInPlaneApplies; FAILED_PRECONDITION elsewhere.
// Needs no working space.
absl::Status DepthwiseInPlane(const ConvGeometry& g, int64_t n, int64_t c, const float* x,
                              const float* w, const float* bias, const ConvEpilogue& act, float* y);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_DEPTHWISE_CONV_IN_PLANE_H_
