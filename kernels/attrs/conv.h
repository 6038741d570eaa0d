#ifndef NDSERVE_KERNELS_ATTRS_CONV_H_
#define NDSERVE_KERNELS_ATTRS_CONV_H_

// Attribute structs of the convolution, pooling, normalization and resizing ops.
// Plain values; see op_attrs.h for the conventions. Spatial attributes are stored as ONNX
// writes them (an empty vector means "the default for every spatial dim"); the geometry
// they imply for given shapes is worked out once by MakeConvGeometry (conv_geometry.h),
// which both the rules and the kernels use.

#include <cstdint>
#include <vector>

#include "kernels/conv_activation.h"
#include "memory/dtype.h"

namespace ndserve::kernels {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

// Conv and ConvTranspose. `kernel_shape`, when set, must agree with W's spatial dims.
// `output_padding` and `output_shape` are ConvTranspose's only; `activation` is Conv's
// only, set by the load-time fusion (kernels/conv_activation.h), never by ONNX.
struct ConvAttrs {
  std::vector<int64_t> kernel_shape;
  std::vector<int64_t> strides;    // default 1
  std::vector<int64_t> pads;       // [begin..., end...]; default 0
  std::vector<int64_t> dilations;  // default 1
  int64_t group = 1;
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> output_padding;
  std::vector<int64_t> output_shape;
  ConvEpilogue activation;
};

// MaxPool and AveragePool. `kernel_shape` is required.
struct PoolAttrs {
  std::vector<int64_t> kernel_shape;
  std::vector<int64_t> strides;
  std::vector<int64_t> pads;
  std::vector<int64_t> dilations;
  AutoPad auto_pad = AutoPad::kNotSet;
  bool ceil_mode = false;
  bool count_include_pad = false;  // AveragePool only
};

// BatchNormalization in inference mode (training_mode 1 is rejected when building).
struct BatchNormAttrs {
  float epsilon = 1e-5f;
};

enum class ResizeMode { kNearest, kLinear, kCubic };  // resize_coord.h's mode codes
// coordinate_transformation_mode: how an output coordinate maps back onto the input.
enum class ResizeCoord { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric,
                         kTfHalfPixelForNn };
enum class ResizeNearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

// Resize (opset 13+). Exactly one of `scales` and `sizes` (host inputs 2 and 3) is set,
// one value per dim of X; only the last two dims may change size, or the last three of a
// 5-D X (linear is bilinear or trilinear; cubic is bicubic, its depth never resized).
struct ResizeAttrs {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  float cubic_a = -0.75f;        // cubic_coeff_a (PyTorch's bicubic uses -0.75 too)
  bool exclude_outside = false;  // cubic: taps outside the input get weight 0, the rest renormalized
  std::vector<float> scales;
  std::vector<int64_t> sizes;
};

// GridSample (opset 16, PyTorch's F.grid_sample): codes as kernels/grid_sample_coord.h
// reads them.
enum class GridSampleMode { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum class GridSamplePadding { kZeros = 0, kBorder = 1, kReflection = 2 };
struct GridSampleAttrs {
  GridSampleMode mode = GridSampleMode::kBilinear;
  GridSamplePadding padding = GridSamplePadding::kZeros;
  bool align_corners = false;
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ATTRS_CONV_H_
