#ifndef NDSERVE_KERNELS_CUDA_CONV_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_CONV_LAUNCHERS_H_

// Raw launchers of the conv family's .cu kernels (conv.cu, pool.cu, batch_norm.cu,
// resize.cu, grid_sample.cu): plain
// pointers and sizes in, the launch's cudaError_t out. Like launchers.h, no Abseil, so
// nvcc stays fast; conv_kernels.cc plans and calls these. Each queues work on `stream`
// and returns at once; nothing is launched for an empty output. Reentrant.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/conv_activation.h"

namespace ndserve::kernels::gpu {

// A window walk (see kernels/cpu/conv.cc's Window): `channels` image volumes of
// img_d x img_h x img_w and a grid of col_d x col_h x col_w window positions; position
// (z, r, s), tap (kz, ki, kj) reads pixel (z * sd - pf + kz * dd, r * sh - pt + ki * dh,
// s * sw - pl + kj * dw) when it is inside. A 2-D walk has depth 1.
struct ConvWindowArgs {
  int64_t channels = 0;
  int64_t img_d = 1, img_h = 1, img_w = 1, col_d = 1, col_h = 1, col_w = 1;
  int64_t kd = 1, kh = 1, kw = 1, sd = 1, sh = 1, sw = 1, dd = 1, dh = 1, dw = 1;
  int64_t pf = 0, pt = 0, pl = 0;
  int64_t pk = 0, pb = 0, pr = 0;  // end padding (pooling's count_include_pad)

  NDS_HD_OP int64_t img_plane() const { return img_d * img_h * img_w; }
  NDS_HD_OP int64_t col_plane() const { return col_d * col_h * col_w; }
  NDS_HD_OP int64_t taps() const { return kd * kh * kw; }
};

// col[((c * kd + kz) * kh + ki) * kw + kj][(z * col_h + r) * col_w + s] = pixel or 0.
cudaError_t LaunchIm2Col(const float* img, const ConvWindowArgs& w, float* col,
                         cudaStream_t stream);
// img[pixel] += the sum of every col entry that reads it (the adjoint of Im2Col). One
// thread per pixel gathers, so no atomics and a deterministic order.
cudaError_t LaunchCol2Im(const float* col, const ConvWindowArgs& w, float* img,
                         cudaStream_t stream);
// Depthwise conv of `n` images: input channel c feeds outputs c * mg .. c * mg + mg - 1;
// w.channels is the input channel count. `bias` may be null. `act` is applied to each
// output as it is written.
cudaError_t LaunchDepthwiseConv(const float* x, const float* weight, const float* bias, float* y,
                                int64_t n, int64_t mg, const ConvWindowArgs& w,
                                const ConvEpilogue& act, cudaStream_t stream);
// y[i] = act(y[i]) for the `count` floats of y: a fused Conv's activation after its GEMMs.
cudaError_t LaunchConvActivation(float* y, int64_t count, const ConvEpilogue& act,
                                 cudaStream_t stream);
// y[i][m][p] = bias[m], or 0 when bias is null.
cudaError_t LaunchFillChannelBias(const float* bias, float* y, int64_t n, int64_t m, int64_t plane,
                                  cudaStream_t stream);

// MaxPool (indices may be null) or AveragePool over `planes` planes: window positions
// are the output pixels.
cudaError_t LaunchMaxPool(const float* x, float* y, int64_t* indices, int64_t planes,
                          const ConvWindowArgs& w, cudaStream_t stream);
cudaError_t LaunchAveragePool(const float* x, float* y, int64_t planes, const ConvWindowArgs& w,
                              bool count_include_pad, cudaStream_t stream);
// One warp per plane of `plane` elements: its mean or max.
cudaError_t LaunchGlobalPool(const float* x, float* y, int64_t planes, int64_t plane, bool max,
                             cudaStream_t stream);

// y = (x - mean[c]) * scale[c] / sqrt(var[c] + epsilon) + bias[c] over (n, c, inner).
cudaError_t LaunchBatchNorm(const float* x, const float* scale, const float* bias,
                            const float* mean, const float* var, float* y, int64_t n, int64_t c,
                            int64_t inner, float epsilon, cudaStream_t stream);
// y = (x - mean_p) / sqrt(var_p + epsilon) * scale[c] + bias[c], each (n, c) plane p of
// `inner` values with its own mean and variance.
cudaError_t LaunchInstanceNorm(const float* x, const float* scale, const float* bias, float* y,
                               int64_t n, int64_t c, int64_t inner, float epsilon,
                               cudaStream_t stream);

// Resize of `planes` volumes from in_d x in_h x in_w to out_d x out_h x out_w (depth 1
// but for a 5-D X, where `depth` is set); mode, coord and nearest are the ResizeMode,
// ResizeCoord and ResizeNearest codes (kernels/resize_coord.h).
struct ResizeArgs {
  int64_t planes = 0, in_d = 1, in_h = 1, in_w = 1, out_d = 1, out_h = 1, out_w = 1;
  float scale_d = 1.0f, scale_h = 1.0f, scale_w = 1.0f;
  int mode = 0, coord = 0, nearest = 0;
  float cubic_a = -0.75f;
  bool exclude_outside = false, depth = false;
};
cudaError_t LaunchResize(const float* x, float* y, const ResizeArgs& args, cudaStream_t stream);

// GridSample of X (n, c, in_h, in_w) at grid (n, out_h, out_w, 2); mode and padding are
// the GridSampleMode / GridSamplePadding codes (kernels/grid_sample_coord.h).
struct GridSampleArgs {
  int64_t n = 0, c = 0, in_h = 1, in_w = 1, out_h = 1, out_w = 1;
  int mode = 0, padding = 0;
  bool align_corners = false;
};
cudaError_t LaunchGridSample(const float* x, const float* grid, float* y, const GridSampleArgs& a,
                             cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_CONV_LAUNCHERS_H_
