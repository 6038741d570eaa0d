#ifndef NDSERVE_KERNELS_RESIZE_PLAN_H_
#define NDSERVE_KERNELS_RESIZE_PLAN_H_

// Resize's shape arithmetic, shared by its rules and kernels: the output shape and the
// per-axis scale that maps output coordinates back onto the input. Pure; thread-safe.

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/attrs/conv.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels {

// X as `planes` volumes of in_d x in_h x in_w (the last three dims of a 5-D X, else
// depth 1 and the last two; 1 x in_w for rank 1) resized to out_d x out_h x out_w.
// scale_* is what coordinate_transformation_mode divides by: the given scale, or out / in
// when sizes were given. `depth` says whether the depth dim is interpolated at all (5-D
// X); otherwise it is a single tap. A plain value.
struct ResizePlan {
  Shape out_shape;
  int64_t planes = 0;
  int64_t in_d = 1, in_h = 1, in_w = 1, out_d = 1, out_h = 1, out_w = 1;
  float scale_d = 1.0f, scale_h = 1.0f, scale_w = 1.0f;
  bool depth = false;
};

// INVALID_ARGUMENT for scales/sizes of the wrong length or non-positive values;
// UNIMPLEMENTED when a dim other than the last two (three for a 5-D X) changes size, or
// when cubic would resize a depth.
absl::StatusOr<ResizePlan> MakeResizePlan(const ResizeAttrs& attrs, ShapeSpan x);

// Whether no dim of `p` changes: sizes kept at scale 1. Each dim's taps are then its own
// input with weight 1 (kernels/resize_coord.h ResizeTapsOf; cubic's others weigh 0), so
// Resize is a copy (torchvision's detectors resize a 320 x 320 input to 320 x 320).
bool IsIdentityResize(const ResizePlan& p);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_RESIZE_PLAN_H_
