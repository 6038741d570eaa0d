#ifndef NDSERVE_KERNELS_CPU_DIRECT_CONV_H_
#define NDSERVE_KERNELS_CPU_DIRECT_CONV_H_

// A one-group Conv without im2col: W packed at load as PackedGemm's A side (M x C*kh*kw)
// times a B that the micro-kernel reads in place from a zero-bordered copy of the image.
// For stride 1, output column n = oh * Wp + ow of a "wide" grid out_h x Wp (Wp the padded
// width; columns with ow >= out_w are computed and dropped), and row k = (c, ki, kj) of
// the im2col matrix is Xp[off[k] + n] with off[k] = c * plane + ki * dil_h * Wp +
// kj * dil_w: contiguous in n, so a 16-wide tile loads its two B vectors straight from
// the image. A stride s > 1 splits each padded channel into s_h x s_w phase planes
// (phase (a, b) holds padded rows a, a + s_h, ... and columns b, b + s_w, ...), where
// each tap is again contiguous in n over a wide grid out_h x (phase width).
// No col matrix and no B packing: the image lines a tile needs for one K block stay in
// L1 while every A panel of the task passes over them (docs/design.md §4.4).

#include <cstdint>

#include "kernels/conv_activation.h"
#include "kernels/conv_geometry.h"
#include "kernels/cpu/packed_gemm.h"

namespace ndserve::kernels::cpu {

// Whether DirectConv takes this conv of `c` input channels: any kernel size, dilation
// and padding, strides up to 64 phase planes (stride_h * stride_w), except a pointwise
// conv (which PackedGemm reads as its B directly), with every offset inside int32.
bool DirectConvSuits(const ConvGeometry& g, int64_t c);

// Floats of scratch DirectConv needs for `n` images of `c` channels into `m` outputs.
int64_t DirectConvScratchFloats(const ConvGeometry& g, int64_t n, int64_t c, int64_t m);

// y [n, m, out_h, out_w] = act(conv(x [n, c, in_h, in_w], W) + bias) with W packed as an
// m x c*kh*kw A side; bias may be null. `scratch` holds DirectConvScratchFloats floats,
// 64-byte aligned. Splits its tiles over ParallelFor; calls no BLAS.
void DirectConv(const ConvGeometry& g, const PackedMatrix& w, int64_t n, int64_t c, int64_t m,
                const float* x, const float* bias, const ConvEpilogue& act, float* scratch,
                float* y);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_DIRECT_CONV_H_
