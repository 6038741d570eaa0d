// Rules of the detection-head ops: NonMaxSuppression and RoiAlign.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {

// max_output_boxes_per_class, iou_threshold and score_threshold are host inputs 2 to 4.
absl::StatusOr<OpAttrs> BuildNonMaxSuppression(OpKind op, int, const AttrMap& attrs,
                                               const HostInputs& host) {
  NmsAttrs a;
  NDS_ASSIGN_OR_RETURN(const int64_t center, GetAttr<int64_t>(op, attrs, "center_point_box", 0));
  if (center != 0 && center != 1) {
    return Invalid(op, absl::StrCat("center_point_box must be 0 or 1, got ", center));
  }
  a.center_point_box = center == 1;
  NDS_ASSIGN_OR_RETURN(const std::optional<double> max_boxes,
                       host.Scalar(op, 2, "max_output_boxes_per_class"));
  NDS_ASSIGN_OR_RETURN(const std::optional<double> iou, host.Scalar(op, 3, "iou_threshold"));
  NDS_ASSIGN_OR_RETURN(const std::optional<double> score, host.Scalar(op, 4, "score_threshold"));
  // torchvision writes INT64_MAX ("no limit"); a double holds it as 2^63.
  if (max_boxes.has_value()) {
    a.max_per_class = *max_boxes <= 0 ? 0
                      : *max_boxes >= 0x1p62 ? (int64_t{1} << 62)
                                             : static_cast<int64_t>(*max_boxes);
  }
  if (iou.has_value()) {
    if (!(*iou >= 0.0 && *iou <= 1.0)) {
      return Invalid(op, absl::StrCat("iou_threshold must be in [0, 1], got ", *iou));
    }
    a.iou_threshold = static_cast<float>(*iou);
  }
  if (score.has_value()) {
    a.has_score_threshold = true;
    a.score_threshold = static_cast<float>(*score);
  }
  return a;
}

absl::StatusOr<Descs> InferNonMaxSuppression(OpKind op, absl::Span<const TensorDesc> in,
                                             const OpAttrs& attrs) {
  const NmsAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "boxes", {DType::kFp32}));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[1], "scores", {DType::kFp32}));
  const ShapeSpan b = in[0].shape, s = in[1].shape;
  if (b.size() != 3 || b[2] != 4 || s.size() != 3 || s[0] != b[0] || s[2] != b[1]) {
    return Invalid(op, absl::StrCat("boxes must be [batch, boxes, 4] and scores [batch, "
                                    "classes, boxes]; got ",
                                    ShapeToString(b), " and ", ShapeToString(s)));
  }
  return Descs{{DType::kInt64, Shape{kDataDependentDim, 3}}};
}

absl::StatusOr<OpAttrs> BuildRoiAlign(OpKind op, int opset, const AttrMap& attrs,
                                      const HostInputs&) {
  RoiAlignAttrs a;
  NDS_ASSIGN_OR_RETURN(const std::string mode, GetAttr<std::string>(op, attrs, "mode", "avg"));
  if (mode != "avg" && mode != "max") {
    return Invalid(op, absl::StrCat("mode must be 'avg' or 'max', got '", mode, "'"));
  }
  a.max_mode = mode == "max";
  // Opset 16 added the attribute and made half_pixel the default; before, every RoiAlign
  // was what 16 calls output_half_pixel.
  NDS_ASSIGN_OR_RETURN(const std::string ctm,
                       GetAttr<std::string>(op, attrs, "coordinate_transformation_mode",
                                            opset >= 16 ? "half_pixel" : "output_half_pixel"));
  if (ctm != "half_pixel" && ctm != "output_half_pixel") {
    return Invalid(op, absl::StrCat("coordinate_transformation_mode must be 'half_pixel' or "
                                    "'output_half_pixel', got '",
                                    ctm, "'"));
  }
  a.half_pixel = ctm == "half_pixel";
  NDS_ASSIGN_OR_RETURN(a.output_height, GetAttr<int64_t>(op, attrs, "output_height", 1));
  NDS_ASSIGN_OR_RETURN(a.output_width, GetAttr<int64_t>(op, attrs, "output_width", 1));
  NDS_ASSIGN_OR_RETURN(a.sampling_ratio, GetAttr<int64_t>(op, attrs, "sampling_ratio", 0));
  NDS_ASSIGN_OR_RETURN(a.spatial_scale, GetAttr<float>(op, attrs, "spatial_scale", 1.0f));
  // Past 2^16 bins or samples per side nothing real is asked for, and the products stay
  // far from overflowing.
  if (a.output_height < 1 || a.output_width < 1 || a.output_height > 65536 ||
      a.output_width > 65536) {
    return Invalid(op, absl::StrCat("output_height and output_width must be 1 to 65536, got ",
                                    a.output_height, " and ", a.output_width));
  }
  if (a.sampling_ratio < 0 || a.sampling_ratio > 65536) {
    return Invalid(op, absl::StrCat("sampling_ratio must be 0 to 65536, got ", a.sampling_ratio));
  }
  if (!(a.spatial_scale > 0.0f)) {
    return Invalid(op, absl::StrCat("spatial_scale must be positive, got ", a.spatial_scale));
  }
  return a;
}

absl::StatusOr<Descs> InferRoiAlign(OpKind op, absl::Span<const TensorDesc> in,
                                    const OpAttrs& attrs) {
  const RoiAlignAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 3, 3));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "X", {DType::kFp32}));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[1], "rois", {DType::kFp32}));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[2], "batch_indices", {DType::kInt64, DType::kInt32}));
  const ShapeSpan x = in[0].shape, r = in[1].shape, bi = in[2].shape;
  if (x.size() != 4 || r.size() != 2 || r[1] != 4 || bi.size() != 1 || bi[0] != r[0]) {
    return Invalid(op, absl::StrCat("X must be [N, C, H, W], rois [R, 4] and batch_indices "
                                    "[R]; got ",
                                    ShapeToString(x), ", ", ShapeToString(r), " and ",
                                    ShapeToString(bi)));
  }
  Shape out{r[0], x[1], a->output_height, a->output_width};
  NDS_RETURN_IF_ERROR(ValidateShape(out, "RoiAlign output"));
  return Descs{{DType::kFp32, out}};
}

}  // namespace ndserve::kernels::rules
