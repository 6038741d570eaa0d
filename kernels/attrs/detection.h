#ifndef NDSERVE_KERNELS_ATTRS_DETECTION_H_
#define NDSERVE_KERNELS_ATTRS_DETECTION_H_

// Attribute structs of the detection-head ops (torchvision's nms / batched_nms and
// roi_align as they export). Plain values; see op_attrs.h for the conventions.

#include <cstdint>

namespace ndserve::kernels {

// NonMaxSuppression over boxes [B, N, 4] and scores [B, C, N]: per (batch, class), the
// boxes in score order (ties: the lower box index first), each dropped when its IoU with
// one already kept is above `iou_threshold`, at most `max_per_class` of them. A box whose
// score is not above `score_threshold` is never kept (when one is given). Output
// [selected, 3] INT64 rows (batch, class, box), by batch, then class, then score.
// Host inputs 2 to 4 (constants in torchvision's exports); absent ones take ONNX's
// defaults: 0 boxes, IoU 0, no score threshold.
struct NmsAttrs {
  bool center_point_box = false;  // boxes are [x_center, y_center, w, h], else corners
  int64_t max_per_class = 0;
  float iou_threshold = 0.0f;
  bool has_score_threshold = false;
  float score_threshold = 0.0f;
};

// RoiAlign over X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2 in the input's scale) and
// batch_indices [R]: [R, C, output_height, output_width], each bin the mean (or, `max`,
// the largest) of sampling_ratio² bilinear samples (sampling_ratio 0: ceil(roi size /
// bins) per dim and roi). `half_pixel` is opset 16's default coordinate transformation
// (torchvision's aligned=True): coordinates shifted by half a pixel, no minimum roi
// size; otherwise 'output_half_pixel' (aligned=False, and every opset before 16): no
// shift, rois at least 1 x 1.
struct RoiAlignAttrs {
  bool max_mode = false;
  bool half_pixel = true;
  int64_t output_height = 1;
  int64_t output_width = 1;
  int64_t sampling_ratio = 0;
  float spatial_scale = 1.0f;
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ATTRS_DETECTION_H_
