#ifndef NDSERVE_KERNELS_DETECTION_COORD_H_
#define NDSERVE_KERNELS_DETECTION_COORD_H_

// The per-box and per-sample arithmetic of NonMaxSuppression and RoiAlign, written once
// for the CPU kernels and the CUDA kernels (this header compiles under nvcc: no Abseil, no
// std:: math), so both devices keep the same boxes and read the same pixels with the same
// weights. Every product and sum is rounded on its own (nvcc would otherwise contract
// them into FMAs, the CPU build never does: kernels/CMakeLists.txt), so the two devices
// agree bit for bit, and an IoU right at the threshold goes the same way on both.
// Semantics: kernels/attrs/detection.h.

#include <math.h>

#include <cstdint>

#include "kernels/elementwise_ops.h"  // NDS_HD_OP

namespace ndserve::kernels {

NDS_HD_OP float DetMul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
NDS_HD_OP float DetAdd(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
NDS_HD_OP float DetSub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
NDS_HD_OP float DetDiv(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// ---------------------------------------------------------------------------------------
// NonMaxSuppression

// A box as its extent along the two axes ONNX calls y and x. IoU treats the axes alike,
// so torchvision's (x1, y1, x2, y2) boxes, which its export passes unchanged, give the
// same overlaps as (y1, x1, y2, x2) would.
struct NmsBox {
  float lo0, lo1, hi0, hi1;
};

// Corners in either order (min / max taken), or center_point_box's [xc, yc, w, h] as
// ONNX Runtime reads it: centre -/+ half the size, so a negative size makes an empty box.
NDS_HD_OP NmsBox NmsDecodeBox(const float* b, bool center_point_box) {
  NmsBox r;
  if (center_point_box) {
    const float hw = DetDiv(b[2], 2.0f), hh = DetDiv(b[3], 2.0f);
    r.lo1 = DetSub(b[0], hw);
    r.hi1 = DetAdd(b[0], hw);
    r.lo0 = DetSub(b[1], hh);
    r.hi0 = DetAdd(b[1], hh);
  } else {
    r.lo0 = b[0] <= b[2] ? b[0] : b[2];
    r.hi0 = b[0] <= b[2] ? b[2] : b[0];
    r.lo1 = b[1] <= b[3] ? b[1] : b[3];
    r.hi1 = b[1] <= b[3] ? b[3] : b[1];
  }
  return r;
}

// Whether a kept box `a` suppresses candidate `b`: IoU(a, b) > threshold. A box without
// area (or any NaN) overlaps nothing. Areas and the union are formed as torchvision's nms
// forms them (area_a + area_b - intersection), so the decisions match it exactly.
NDS_HD_OP bool NmsSuppresses(const NmsBox& a, const NmsBox& b, float iou_threshold) {
  const float ilo0 = a.lo0 > b.lo0 ? a.lo0 : b.lo0;
  const float ihi0 = a.hi0 < b.hi0 ? a.hi0 : b.hi0;
  const float ilo1 = a.lo1 > b.lo1 ? a.lo1 : b.lo1;
  const float ihi1 = a.hi1 < b.hi1 ? a.hi1 : b.hi1;
  if (!(ihi0 > ilo0) || !(ihi1 > ilo1)) return false;
  const float inter = DetMul(DetSub(ihi0, ilo0), DetSub(ihi1, ilo1));
  const float area_a = DetMul(DetSub(a.hi0, a.lo0), DetSub(a.hi1, a.lo1));
  const float area_b = DetMul(DetSub(b.hi0, b.lo0), DetSub(b.hi1, b.lo1));
  const float uni = DetSub(DetAdd(area_a, area_b), inter);
  if (!(inter > 0.0f) || !(area_a > 0.0f) || !(area_b > 0.0f) || !(uni > 0.0f)) return false;
  return DetDiv(inter, uni) > iou_threshold;
}

// ---------------------------------------------------------------------------------------
// RoiAlign

// Past this many samples per bin side a roi is garbage (a coordinate of 1e30, NaN): the
// count is capped so the float-to-int conversion stays defined and a kernel finishes.
inline constexpr int64_t kRoiAlignMaxGrid = 65536;

// One roi's bins: where bin (0, 0) starts, a bin's size, and the samples per bin side.
struct RoiAlignGeometry {
  float start_h, start_w, bin_h, bin_w;
  int64_t grid_h, grid_w;
  float count;  // what a bin's sum is divided by (avg)
};

NDS_HD_OP int64_t RoiAlignGridOf(float bin, int64_t sampling_ratio) {
  if (sampling_ratio > 0) return sampling_ratio;
  const float g = ceilf(bin);
  if (!(g > 0.0f)) return 0;  // an empty or inverted roi (half_pixel), or NaN
  return g < static_cast<float>(kRoiAlignMaxGrid) ? static_cast<int64_t>(g) : kRoiAlignMaxGrid;
}

// roi is (x1, y1, x2, y2) in the input image's scale; torchvision's roi_align (aligned =
// half_pixel) and ONNX Runtime's RoiAlign do the same arithmetic in the same order.
NDS_HD_OP RoiAlignGeometry RoiAlignGeometryOf(const float* roi, float spatial_scale,
                                              bool half_pixel, int64_t out_h, int64_t out_w,
                                              int64_t sampling_ratio) {
  const float offset = half_pixel ? 0.5f : 0.0f;
  RoiAlignGeometry g;
  g.start_w = DetSub(DetMul(roi[0], spatial_scale), offset);
  g.start_h = DetSub(DetMul(roi[1], spatial_scale), offset);
  const float end_w = DetSub(DetMul(roi[2], spatial_scale), offset);
  const float end_h = DetSub(DetMul(roi[3], spatial_scale), offset);
  float roi_w = DetSub(end_w, g.start_w);
  float roi_h = DetSub(end_h, g.start_h);
  if (!half_pixel) {  // malformed rois become 1 x 1
    roi_w = roi_w > 1.0f ? roi_w : 1.0f;
    roi_h = roi_h > 1.0f ? roi_h : 1.0f;
  }
  g.bin_h = DetDiv(roi_h, static_cast<float>(out_h));
  g.bin_w = DetDiv(roi_w, static_cast<float>(out_w));
  g.grid_h = RoiAlignGridOf(g.bin_h, sampling_ratio);
  g.grid_w = RoiAlignGridOf(g.bin_w, sampling_ratio);
  const int64_t n = g.grid_h * g.grid_w;
  g.count = static_cast<float>(n > 1 ? n : 1);
  return g;
}

// Sample (iy, ix) of bin (ph, pw), along one axis: start + p * bin + (i + .5) * bin / grid.
NDS_HD_OP float RoiAlignSampleCoord(float start, float bin, int64_t p, int64_t i, int64_t grid) {
  return DetAdd(DetAdd(start, DetMul(static_cast<float>(p), bin)),
                DetDiv(DetMul(static_cast<float>(i) + 0.5f, bin), static_cast<float>(grid)));
}

// The four taps of one bilinear sample in an h x w plane: offsets and weights, in the
// order (low y, low x), (low y, high x), (high y, low x), (high y, high x). A sample
// outside [-1, h] x [-1, w] (or NaN, or in an empty plane) has no taps: valid is false and
// it counts as 0. Coordinates in [-1, 0] read row / column 0; past the last row or column
// they read it, as torchvision's bilinear_interpolate does.
struct RoiTaps {
  bool valid;
  int64_t at[4];
  float w[4];
};

NDS_HD_OP RoiTaps RoiAlignTaps(float y, float x, int64_t h, int64_t w) {
  RoiTaps t;
  t.valid = h > 0 && w > 0 && y >= -1.0f && y <= static_cast<float>(h) && x >= -1.0f &&
            x <= static_cast<float>(w);
  if (!t.valid) return t;
  y = y > 0.0f ? y : 0.0f;
  x = x > 0.0f ? x : 0.0f;
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= h - 1) {
    y0 = y1 = h - 1;
    y = static_cast<float>(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= w - 1) {
    x0 = x1 = w - 1;
    x = static_cast<float>(x0);
  } else {
    x1 = x0 + 1;
  }
  const float ly = DetSub(y, static_cast<float>(y0)), lx = DetSub(x, static_cast<float>(x0));
  const float hy = DetSub(1.0f, ly), hx = DetSub(1.0f, lx);
  t.at[0] = y0 * w + x0;
  t.at[1] = y0 * w + x1;
  t.at[2] = y1 * w + x0;
  t.at[3] = y1 * w + x1;
  t.w[0] = DetMul(hy, hx);
  t.w[1] = DetMul(hy, lx);
  t.w[2] = DetMul(ly, hx);
  t.w[3] = DetMul(ly, lx);
  return t;
}

// avg: the sample's interpolated value. max: ONNX Runtime's (and the ONNX reference's)
// definition, the largest of the four weighted taps (not the interpolated value).
NDS_HD_OP float RoiAlignSampleValue(const float* plane, const RoiTaps& t, bool max_mode) {
  if (!t.valid) return 0.0f;
  const float p0 = DetMul(t.w[0], plane[t.at[0]]), p1 = DetMul(t.w[1], plane[t.at[1]]);
  const float p2 = DetMul(t.w[2], plane[t.at[2]]), p3 = DetMul(t.w[3], plane[t.at[3]]);
  if (!max_mode) return DetAdd(DetAdd(DetAdd(p0, p1), p2), p3);
  float m = p0 < p1 ? p1 : p0;
  m = m < p2 ? p2 : m;
  return m < p3 ? p3 : m;
}

// The taps of sample (iy, ix) of bin (ph, pw).
NDS_HD_OP RoiTaps RoiAlignSampleTaps(const RoiAlignGeometry& g, int64_t ph, int64_t pw, int64_t iy,
                                     int64_t ix, int64_t h, int64_t w) {
  return RoiAlignTaps(RoiAlignSampleCoord(g.start_h, g.bin_h, ph, iy, g.grid_h),
                      RoiAlignSampleCoord(g.start_w, g.bin_w, pw, ix, g.grid_w), h, w);
}

// A bin's samples, folded in row by row: their sum (avg) or their largest (max; 0 for a
// bin without samples).
struct RoiAlignAcc {
  float value = 0.0f;
  bool first = true;
};

NDS_HD_OP void RoiAlignFold(RoiAlignAcc* acc, float v, bool max_mode) {
  if (!max_mode) {
    acc->value = DetAdd(acc->value, v);
  } else if (acc->first || acc->value < v) {
    acc->value = v;
  }
  acc->first = false;
}

NDS_HD_OP float RoiAlignResult(const RoiAlignAcc& acc, const RoiAlignGeometry& g, bool max_mode) {
  return max_mode ? acc.value : DetDiv(acc.value, g.count);
}

// Output bin (ph, pw) of one roi over one channel's plane.
NDS_HD_OP float RoiAlignBin(const float* plane, const RoiAlignGeometry& g, int64_t ph, int64_t pw,
                            int64_t h, int64_t w, bool max_mode) {
  RoiAlignAcc acc;
  for (int64_t iy = 0; iy < g.grid_h; ++iy) {
    for (int64_t ix = 0; ix < g.grid_w; ++ix) {
      RoiAlignFold(&acc,
                   RoiAlignSampleValue(plane, RoiAlignSampleTaps(g, ph, pw, iy, ix, h, w), max_mode),
                   max_mode);
    }
  }
  return RoiAlignResult(acc, g, max_mode);
}

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_DETECTION_COORD_H_
