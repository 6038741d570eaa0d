// Rules of GridSample (opset 16) and Resize (opset 13+): roi, scales and sizes are host inputs 1-3; modes nearest,
// linear and cubic over the last two dims (nearest and linear also over the last three of
// a 5-D input).
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/op_rules.h"
#include "kernels/resize_plan.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {

absl::StatusOr<OpAttrs> BuildResize(OpKind op, int, const AttrMap& attrs, const HostInputs& host) {
  ResizeAttrs a;
  NDS_ASSIGN_OR_RETURN(const std::string mode, GetAttr<std::string>(op, attrs, "mode", "nearest"));
  if (mode == "nearest") {
    a.mode = ResizeMode::kNearest;
  } else if (mode == "linear") {
    a.mode = ResizeMode::kLinear;
  } else if (mode == "cubic") {
    a.mode = ResizeMode::kCubic;
    NDS_ASSIGN_OR_RETURN(a.cubic_a, GetAttr<float>(op, attrs, "cubic_coeff_a", -0.75f));
    NDS_ASSIGN_OR_RETURN(a.exclude_outside, GetBoolAttr(op, attrs, "exclude_outside", false));
  } else {
    return Invalid(op, absl::StrCat("unknown mode '", mode, "'"));
  }
  NDS_ASSIGN_OR_RETURN(
      const std::string coord,
      GetAttr<std::string>(op, attrs, "coordinate_transformation_mode", "half_pixel"));
  if (coord == "half_pixel") {
    a.coord = ResizeCoord::kHalfPixel;
  } else if (coord == "pytorch_half_pixel") {
    a.coord = ResizeCoord::kPytorchHalfPixel;
  } else if (coord == "align_corners") {
    a.coord = ResizeCoord::kAlignCorners;
  } else if (coord == "asymmetric") {
    a.coord = ResizeCoord::kAsymmetric;
  } else if (coord == "tf_half_pixel_for_nn") {
    a.coord = ResizeCoord::kTfHalfPixelForNn;
  } else if (coord == "tf_crop_and_resize") {
    return absl::UnimplementedError(
        "Resize: coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  } else {
    return Invalid(op, absl::StrCat("unknown coordinate_transformation_mode '", coord, "'"));
  }
  NDS_ASSIGN_OR_RETURN(const std::string nearest,
                       GetAttr<std::string>(op, attrs, "nearest_mode", "round_prefer_floor"));
  if (nearest == "round_prefer_floor") {
    a.nearest = ResizeNearest::kRoundPreferFloor;
  } else if (nearest == "round_prefer_ceil") {
    a.nearest = ResizeNearest::kRoundPreferCeil;
  } else if (nearest == "floor") {
    a.nearest = ResizeNearest::kFloor;
  } else if (nearest == "ceil") {
    a.nearest = ResizeNearest::kCeil;
  } else {
    return Invalid(op, absl::StrCat("unknown nearest_mode '", nearest, "'"));
  }
  // An empty scales or sizes tensor stands for an omitted input (opset 13 exporters write
  // one so that a later input can be given).
  if (const HostValue* scales = host.Get(2); scales != nullptr && scales->numel() > 0) {
    if (!scales->IsReal() || scales->shape.size() != 1) {
      return Invalid(op, "scales must be a 1-D floating-point tensor");
    }
    for (double s : scales->reals) a.scales.push_back(static_cast<float>(s));
  }
  if (const HostValue* sizes = host.Get(3); sizes != nullptr && sizes->numel() > 0) {
    NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> v, host.Ints(op, 3, "sizes"));
    a.sizes = *std::move(v);
  }
  if (a.scales.empty() == a.sizes.empty()) {
    return Invalid(op, "exactly one of the inputs scales and sizes must be given (as a constant)");
  }
  return a;
}

absl::StatusOr<Descs> InferResize(OpKind op, absl::Span<const TensorDesc> in,
                                  const OpAttrs& attrs) {
  const ResizeAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "X", {DType::kFp32}));
  NDS_ASSIGN_OR_RETURN(const ResizePlan p, MakeResizePlan(*a, in[0].shape));
  return Descs{{DType::kFp32, p.out_shape}};
}

// GridSample: X (N, C, H, W) sampled at grid (N, H_out, W_out, 2) of (x, y) in [-1, 1].
absl::StatusOr<OpAttrs> BuildGridSample(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  GridSampleAttrs a;
  NDS_ASSIGN_OR_RETURN(const std::string mode, GetAttr<std::string>(op, attrs, "mode", "bilinear"));
  if (mode == "bilinear") {
    a.mode = GridSampleMode::kBilinear;
  } else if (mode == "nearest") {
    a.mode = GridSampleMode::kNearest;
  } else if (mode == "bicubic") {
    a.mode = GridSampleMode::kBicubic;
  } else {
    return Invalid(op, absl::StrCat("unknown mode '", mode, "'"));
  }
  NDS_ASSIGN_OR_RETURN(const std::string padding,
                       GetAttr<std::string>(op, attrs, "padding_mode", "zeros"));
  if (padding == "zeros") {
    a.padding = GridSamplePadding::kZeros;
  } else if (padding == "border") {
    a.padding = GridSamplePadding::kBorder;
  } else if (padding == "reflection") {
    a.padding = GridSamplePadding::kReflection;
  } else {
    return Invalid(op, absl::StrCat("unknown padding_mode '", padding, "'"));
  }
  NDS_ASSIGN_OR_RETURN(a.align_corners, GetBoolAttr(op, attrs, "align_corners", false));
  return a;
}

absl::StatusOr<Descs> InferGridSample(OpKind op, absl::Span<const TensorDesc> in,
                                      const OpAttrs& attrs) {
  const GridSampleAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "X", {DType::kFp32}));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[1], "grid", {DType::kFp32}));
  const ShapeSpan x = in[0].shape, g = in[1].shape;
  if (x.size() != 4 || g.size() != 4 || g[0] != x[0] || g[3] != 2) {
    return Invalid(op, absl::StrCat("X must be (N, C, H, W) and grid (N, H_out, W_out, 2); got X ",
                                    ShapeToString(x), " and grid ", ShapeToString(g)));
  }
  return Descs{{DType::kFp32, Shape{x[0], x[1], g[1], g[2]}}};
}

}  // namespace ndserve::kernels::rules
