#ifndef NDSERVE_KERNELS_CPU_WINOGRAD_CONV_H_
#define NDSERVE_KERNELS_CPU_WINOGRAD_CONV_H_

// Winograd F(4x4, 3x3) for one-group 3x3 stride-1 undilated convs (resnet's body): each
// 4 x 4 block of outputs ("tile") comes from a 6 x 6 input patch d as
// Y = A^T [U (.) (B^T d B)] A, U = G w G^T, so the 36 products per (tile, c, m) replace
// 144 multiply-adds of the direct conv. Summed over c, each of the 36 positions p is one
// GEMM M_p [m x tiles] = U_p [m x c] x V_p [c x tiles]: U is transformed and packed once
// at load as PackedGemm's A side (36 blocks of round_up(m, 6) rows x c), V is the input
// transform laid out as 16-tile B panels, and the GEMMs run PackedGemm's micro-kernel
// (micro_kernel_6x16.h, or its 12 x 16 AVX-512 form where WinogradUsesAvx512). Bias and
// the fused activation are applied in the output transform. U is 36/9 = 4x W's floats, so
// the direct conv keeps its own packing and takes the calls with too few tiles to pay for
// reading U (docs/design.md §4.4.2).

#include <cstdint>
#include <memory>

#include "kernels/attrs/conv.h"
#include "kernels/conv_activation.h"
#include "kernels/conv_geometry.h"
#include "kernels/cpu/packed_gemm.h"

namespace ndserve::kernels::cpu {

// Whether a Conv node with these attrs and W [m, c, kh, kw] gets a Winograd packing at
// load: one group, 3x3, strides and dilations 1, and enough channels both ways.
bool WinogradWeightSuits(const ConvAttrs& attrs, int64_t m, int64_t c, int64_t kh, int64_t kw);

// W [m, c, 3, 3] (row-major) transformed to U and packed: rows p * round_up(m, 6) + i
// hold position p of output channel i's filters, over c columns.
std::unique_ptr<PackedMatrix> PackWinogradWeight(const float* w, int64_t m, int64_t c);

// Whether a call of geometry `g` on `n` images of `c` channels into `m` takes
// WinogradConv with `u`: a 3x3 stride-1 undilated kernel, u packed for these c and m, and
// enough tiles that one B panel (16) is full.
bool WinogradConvSuits(const ConvGeometry& g, const PackedMatrix& u, int64_t n, int64_t c,
                       int64_t m);

// Floats of scratch WinogradConv needs for `n` images of `c` channels into `m` outputs.
int64_t WinogradConvScratchFloats(const ConvGeometry& g, int64_t n, int64_t c, int64_t m);

// y [n, m, out_h, out_w] = act(conv(x [n, c, in_h, in_w], W) + bias) with `u` from
// PackWinogradWeight; bias may be null. `scratch` holds WinogradConvScratchFloats floats,
// 64-byte aligned. Any pads; splits its work over ParallelFor; calls no BLAS.
void WinogradConv(const ConvGeometry& g, const PackedMatrix& u, int64_t n, int64_t c, int64_t m,
                  const float* x, const float* bias, const ConvEpilogue& act, float* scratch,
                  float* y);

// Whether WinogradConv's GEMMs take 12 x 16 tiles of 16-wide vectors: on AVX-512 CPUs
// other than AMD's Zen 4, whose 512-bit FMAs run as two halves (docs/design.md §4.4).
bool WinogradUsesAvx512();

// Tests: 1 or 0 makes WinogradConv take the 12 x 16 (if the CPU has AVX-512) or the
// 6 x 16 kernel whatever the CPU; -1 goes back to WinogradUsesAvx512. Not thread-safe
// against running convs.
void SetWinogradAvx512ForTesting(int use);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_WINOGRAD_CONV_H_
