#ifndef NDSERVE_KERNELS_GRID_SAMPLE_COORD_H_
#define NDSERVE_KERNELS_GRID_SAMPLE_COORD_H_

// GridSample's per-sample arithmetic, written once for the CPU and the CUDA kernel (this
// header compiles under nvcc: no Abseil, no std:: math), so both read the same pixels
// with the same weights. It follows PyTorch's grid_sampler_2d, which ONNX's GridSample
// describes: grid values in [-1, 1] map to pixel coordinates (corner pixels' centres with
// align_corners, their outer edges without); border padding clamps the coordinate,
// reflection mirrors it at the edges; bilinear and nearest then read taps outside the
// input as 0, and bicubic pads each of its 16 taps (clamp or mirror) instead, with
// Keys' coefficient -0.75. A grid value that is NaN or lands more than 1e9 pixels out
// samples 0. Modes and paddings are the GridSampleMode and GridSamplePadding codes of
// kernels/attrs/conv.h.

#include <math.h>

#include <cstdint>

#include "kernels/elementwise_ops.h"  // NDS_HD_OP
#include "kernels/resize_coord.h"     // CubicWeights

namespace ndserve::kernels {

// Up to 16 taps of one sample: offsets into an H x W plane and their weights; an offset
// of -1 reads 0.
struct GridTaps {
  int n = 0;
  int64_t at[16];
  float w[16];
};

// Pixel coordinate of grid value g along a dim of `size` pixels.
NDS_HD_OP float GridUnnormalize(float g, int64_t size, bool align_corners) {
  return align_corners ? (g + 1.0f) * 0.5f * static_cast<float>(size - 1)
                       : ((g + 1.0f) * static_cast<float>(size) - 1.0f) * 0.5f;
}

// x mirrored into [lo2 / 2, hi2 / 2] (the bounds given doubled, so they stay integers).
NDS_HD_OP float GridReflect(float x, int64_t lo2, int64_t hi2) {
  if (lo2 == hi2) return 0.0f;
  const float lo = static_cast<float>(lo2) * 0.5f;
  const float span = static_cast<float>(hi2 - lo2) * 0.5f;
  x = fabsf(x - lo);
  const float extra = fmodf(x, span);
  const int64_t flips = static_cast<int64_t>(floorf(x / span));
  return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

// Border or reflection padding of a coordinate; zeros leaves it. The result of border
// and reflection lies in [0, size - 1]; NaN stays NaN.
NDS_HD_OP float GridPad(float x, int64_t size, int padding, bool align_corners) {
  if (padding == 0) return x;
  if (padding == 2) {
    x = align_corners ? GridReflect(x, 0, 2 * (size - 1)) : GridReflect(x, -1, 2 * size - 1);
  }
  const float hi = static_cast<float>(size - 1);
  return x < 0.0f ? 0.0f : (x > hi ? hi : x);
}

// An integer index padded as GridPad pads a coordinate, or -1 outside with zeros.
NDS_HD_OP int64_t GridIndex(int64_t i, int64_t size, int padding, bool align_corners) {
  if (padding != 0) {
    i = static_cast<int64_t>(GridPad(static_cast<float>(i), size, padding, align_corners));
  }
  return i >= 0 && i < size ? i : -1;
}

NDS_HD_OP void GridAddTap(GridTaps* t, int64_t y, int64_t x, int64_t w, float weight) {
  t->at[t->n] = (y < 0 || x < 0) ? -1 : y * w + x;
  t->w[t->n] = weight;
  ++t->n;
}

// The taps of the sample at grid point (gx, gy) in an h x w plane.
NDS_HD_OP GridTaps GridSampleTaps(float gx, float gy, int64_t h, int64_t w, int mode, int padding,
                                  bool align_corners) {
  GridTaps t;
  float x = GridUnnormalize(gx, w, align_corners);
  float y = GridUnnormalize(gy, h, align_corners);
  // NaN, or so far outside that its index would not fit: a sample of 0 (and no float to
  // integer conversion out of range).
  if (!(fabsf(x) < 1e9f && fabsf(y) < 1e9f)) {
    GridAddTap(&t, -1, -1, w, 0.0f);
    return t;
  }
  if (mode == 2) {  // bicubic: padding per tap
    const float fx = floorf(x), fy = floorf(y);
    float wx[4], wy[4];
    CubicWeights(x - fx, -0.75f, wx);
    CubicWeights(y - fy, -0.75f, wy);
    const int64_t x0 = static_cast<int64_t>(fx) - 1, y0 = static_cast<int64_t>(fy) - 1;
    for (int i = 0; i < 4; ++i) {
      const int64_t yi = GridIndex(y0 + i, h, padding, align_corners);
      for (int j = 0; j < 4; ++j) {
        GridAddTap(&t, yi, GridIndex(x0 + j, w, padding, align_corners), w, wy[i] * wx[j]);
      }
    }
    return t;
  }
  x = GridPad(x, w, padding, align_corners);
  y = GridPad(y, h, padding, align_corners);
  if (mode == 1) {  // nearest: halves to even, as PyTorch's nearbyint
    const int64_t xi = static_cast<int64_t>(rintf(x)), yi = static_cast<int64_t>(rintf(y));
    const bool inside = xi >= 0 && xi < w && yi >= 0 && yi < h;
    GridAddTap(&t, inside ? yi : -1, inside ? xi : -1, w, 1.0f);
    return t;
  }
  const float fx = floorf(x), fy = floorf(y);
  const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
  const float ax = x - fx, ay = y - fy;
  for (int i = 0; i < 2; ++i) {
    const int64_t yi = y0 + i;
    const bool y_in = yi >= 0 && yi < h;
    for (int j = 0; j < 2; ++j) {
      const int64_t xi = x0 + j;
      const bool in = y_in && xi >= 0 && xi < w;
      GridAddTap(&t, in ? yi : -1, in ? xi : -1, w,
                 (i == 0 ? 1.0f - ay : ay) * (j == 0 ? 1.0f - ax : ax));
    }
  }
  return t;
}

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_GRID_SAMPLE_COORD_H_
