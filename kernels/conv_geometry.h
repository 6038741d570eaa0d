#ifndef NDSERVE_KERNELS_CONV_GEOMETRY_H_
#define NDSERVE_KERNELS_CONV_GEOMETRY_H_

// The spatial arithmetic shared by Conv, ConvTranspose, MaxPool and AveragePool: output
// sizes and the begin/end padding that strides, dilations, pads, auto_pad, ceil_mode,
// output_padding and output_shape imply for concrete input sizes. The rules use it to
// infer output shapes and the kernels to walk windows, so the two cannot disagree.
// Pure functions; thread-safe.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/attrs/conv.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels {

// Always three spatial dims: a 2-D op is the 3-D one with a depth of 1 and a 1-D op the
// 2-D one with a height of 1 (kernel 1, stride 1, dilation 1, no padding), so the
// generic kernels have one code path. The 2-D fast paths (depthwise, direct, Winograd,
// the 3x3 max pool) take only planar geometries (IsPlanar). For ConvTranspose, `in_*` is
// the transposed conv's input and `out_*` its (larger) output. A plain value.
struct ConvGeometry {
  int spatial_rank = 2;  // 1, 2 or 3: how many trailing dims of X are spatial
  int64_t in_d = 1, in_h = 1, in_w = 1;
  int64_t k_d = 1, k_h = 1, k_w = 1;
  int64_t stride_d = 1, stride_h = 1, stride_w = 1;
  int64_t dil_d = 1, dil_h = 1, dil_w = 1;
  int64_t pad_front = 0, pad_top = 0, pad_left = 0;
  int64_t pad_back = 0, pad_bottom = 0, pad_right = 0;
  int64_t out_d = 1, out_h = 1, out_w = 1;

  // "Plane" is the whole spatial extent of one channel (a volume when 3-D).
  int64_t in_plane() const { return in_d * in_h * in_w; }
  int64_t out_plane() const { return out_d * out_h * out_w; }
  int64_t k_plane() const { return k_d * k_h * k_w; }
  bool IsPlanar() const { return spatial_rank <= 2; }
  bool IsPointwise() const {  // 1x1(x1), stride 1, no padding: im2col is the identity
    return k_d == 1 && k_h == 1 && k_w == 1 && stride_d == 1 && stride_h == 1 && stride_w == 1 &&
           pad_front == 0 && pad_top == 0 && pad_left == 0 && pad_back == 0 && pad_bottom == 0 &&
           pad_right == 0;
  }
};

// Conv (transpose false) or ConvTranspose (true) over `x_spatial` with a kernel of
// `k_spatial` (W's trailing dims). INVALID_ARGUMENT naming `op` for attribute lists of the
// wrong length, non-positive strides or dilations, negative pads, or an empty output;
// UNIMPLEMENTED for more than 3 spatial dims.
absl::StatusOr<ConvGeometry> MakeConvGeometry(absl::string_view op, const ConvAttrs& attrs,
                                              ShapeSpan x_spatial, ShapeSpan k_spatial,
                                              bool transpose);

// MaxPool or AveragePool over `x_spatial` with attrs.kernel_shape.
absl::StatusOr<ConvGeometry> MakePoolGeometry(absl::string_view op, const PoolAttrs& attrs,
                                              ShapeSpan x_spatial);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_CONV_GEOMETRY_H_
