#ifndef NDSERVE_KERNELS_RESIZE_COORD_H_
#define NDSERVE_KERNELS_RESIZE_COORD_H_

// Resize's per-coordinate arithmetic, written once for the CPU kernel and the CUDA one
// (this header compiles under nvcc: no Abseil, no std:: math), so that both pick the same
// source pixels. All in float, as onnxruntime computes it. Codes are the ResizeCoord and
// ResizeNearest enumerators of kernels/attrs/conv.h, passed as ints.

#include <math.h>

#include <cstdint>

#include "kernels/elementwise_ops.h"  // NDS_HD_OP

namespace ndserve::kernels {

// The input coordinate that output coordinate `x` maps to (coordinate_transformation_mode).
NDS_HD_OP float ResizeSourceCoord(int coord, float x, float scale, int64_t in_len,
                                  int64_t out_len) {
  switch (coord) {
    case 0:  // half_pixel
      return (x + 0.5f) / scale - 0.5f;
    case 1:  // pytorch_half_pixel
      return out_len > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case 2:  // align_corners
      return out_len == 1 ? 0.0f
                          : x * static_cast<float>(in_len - 1) / static_cast<float>(out_len - 1);
    case 3:  // asymmetric
      return x / scale;
    default:  // tf_half_pixel_for_nn
      return (x + 0.5f) / scale;
  }
}

// The input index nearest mode `mode` picks for source coordinate `x`, clamped inside.
NDS_HD_OP int64_t ResizeNearestIndex(int mode, float x, int64_t in_len) {
  const float fl = floorf(x);
  const bool half = x == fl + 0.5f;
  float r;
  switch (mode) {
    case 0:  // round_prefer_floor
      r = half ? fl : roundf(x);
      break;
    case 1:  // round_prefer_ceil
      r = half ? fl + 1.0f : roundf(x);
      break;
    case 2:  // floor
      r = fl;
      break;
    default:  // ceil
      r = ceilf(x);
      break;
  }
  const int64_t i = static_cast<int64_t>(r);
  return i < 0 ? 0 : (i >= in_len ? in_len - 1 : i);
}

// Linear interpolation taps: the source coordinate clamped into [0, in_len - 1], its two
// neighbours and the weight of the upper one.
NDS_HD_OP void ResizeLinearTaps(float x, int64_t in_len, int64_t* i0, int64_t* i1, float* w1) {
  const float hi = static_cast<float>(in_len - 1);
  x = x < 0.0f ? 0.0f : (x > hi ? hi : x);
  *i0 = static_cast<int64_t>(floorf(x));
  *i1 = *i0 + 1 < in_len ? *i0 + 1 : in_len - 1;
  *w1 = x - static_cast<float>(*i0);
}

// Keys' cubic convolution weights, coefficient `a`, of the four taps floor(x) - 1 ..
// floor(x) + 2 around a point at fraction t past floor(x) (Resize and GridSample).
NDS_HD_OP void CubicWeights(float t, float a, float* w) {
  const float s[4] = {t + 1.0f, t, 1.0f - t, 2.0f - t};  // distances to the four taps
  for (int k = 0; k < 4; ++k) {
    const float d = s[k];
    w[k] = (k == 1 || k == 2) ? ((a + 2.0f) * d - (a + 3.0f)) * d * d + 1.0f
                              : ((a * d - 5.0f * a) * d + 8.0f * a) * d - 4.0f * a;
  }
}

// Cubic convolution taps: the four inputs floor(x) - 1 .. floor(x) + 2 (clamped inside, as
// if the input were padded with its edge values) and Keys' weights with coefficient `a`;
// with exclude_outside, taps that fall outside get weight 0 and the rest are renormalized.
NDS_HD_OP void ResizeCubicTaps(float x, int64_t in_len, float a, bool exclude_outside, int64_t* i,
                               float* w) {
  const float fl = floorf(x);
  CubicWeights(x - fl, a, w);
  float sum = 0.0f;
  for (int k = 0; k < 4; ++k) {
    const int64_t at = static_cast<int64_t>(fl) - 1 + k;
    if (exclude_outside && (at < 0 || at >= in_len)) w[k] = 0.0f;
    sum += w[k];
    i[k] = at < 0 ? 0 : (at >= in_len ? in_len - 1 : at);
  }
  if (exclude_outside && sum != 0.0f) {
    for (int k = 0; k < 4; ++k) w[k] /= sum;
  }
}

// The taps of output coordinate `o` along one dim: mode 0 (nearest) one input with weight
// 1, 1 (linear) two, 2 (cubic) four. Returns the count; i and w hold four entries.
NDS_HD_OP int ResizeTapsOf(int mode, int coord, int nearest, float cubic_a, bool exclude_outside,
                           int64_t o, float scale, int64_t in_len, int64_t out_len, int64_t* i,
                           float* w) {
  // A dim kept at its size and scale 1 is not resized: each output reads its own input,
  // whatever the mode (tf_half_pixel_for_nn would shift it by half a pixel otherwise), as
  // the reference in tools/op_cases/conv.py and ONNX Runtime leave such a dim.
  const float x = in_len == out_len && scale == 1.0f
                      ? static_cast<float>(o)
                      : ResizeSourceCoord(coord, static_cast<float>(o), scale, in_len, out_len);
  if (mode == 0) {
    i[0] = ResizeNearestIndex(nearest, x, in_len);
    w[0] = 1.0f;
    return 1;
  }
  if (mode == 1) {
    ResizeLinearTaps(x, in_len, &i[0], &i[1], &w[1]);
    w[0] = 1.0f - w[1];
    return 2;
  }
  ResizeCubicTaps(x, in_len, cubic_a, exclude_outside, i, w);
  return 4;
}

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_RESIZE_COORD_H_
