#ifndef NDSERVE_KERNELS_RESIZE_COORD_H_
#define NDSERVE_KERNELS_RESIZE_COORD_H_

// Resize's per-coordinate arithmetic, written once for the CPU kernel and the CUDA one
// (this header compiles under nvcc: no Abseil, no std:: math), so that both pick the same
// source pixels. All in float, as onnxruntime computes it. Codes are the ResizeCoord and
// ResizeNearest enumerators of kernels/attrs/conv.h, passed as ints.

#include <math.h>

#include <cstdint>

#ifdef __CUDACC__
#define NDS_HOST_DEVICE __host__ __device__
#else
#define NDS_HOST_DEVICE
#endif

namespace ndserve::kernels {

// The input coordinate that output coordinate `x` maps to (coordinate_transformation_mode).
NDS_HOST_DEVICE inline float ResizeSourceCoord(int coord, float x, float scale, int64_t in_len,
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
NDS_HOST_DEVICE inline int64_t ResizeNearestIndex(int mode, float x, int64_t in_len) {
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
NDS_HOST_DEVICE inline void ResizeLinearTaps(float x, int64_t in_len, int64_t* i0, int64_t* i1,
                                             float* w1) {
  const float hi = static_cast<float>(in_len - 1);
  x = x < 0.0f ? 0.0f : (x > hi ? hi : x);
  *i0 = static_cast<int64_t>(floorf(x));
  *i1 = *i0 + 1 < in_len ? *i0 + 1 : in_len - 1;
  *w1 = x - static_cast<float>(*i0);
}

}  // namespace ndserve::kernels

#undef NDS_HOST_DEVICE

#endif  // NDSERVE_KERNELS_RESIZE_COORD_H_
