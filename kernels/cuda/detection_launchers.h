#ifndef NDSERVE_KERNELS_CUDA_DETECTION_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_DETECTION_LAUNCHERS_H_

// Raw launchers of detection.cu (NonMaxSuppression's overlap mask, RoiAlign): plain
// pointers and sizes in, the launch's cudaError_t out, no Abseil (see launchers.h);
// detection_kernels.cc plans and calls these. Each queues work on `stream` and returns at
// once; nothing is launched for an empty output. Reentrant.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ndserve::kernels::gpu {

// Boxes per word of the overlap mask.
inline constexpr int kNmsMaskBits = 64;

// The overlap mask of the `n` candidates of one (batch, class), in visiting order:
// order[i] is the index into `boxes` ([boxes, 4] of that batch) of candidate i. Row i has
// words = ceil(n / 64) words; bit j % 64 of word j / 64 is set when candidate i
// suppresses candidate j (IoU above `iou_threshold`), for j > i only. Words left of the
// diagonal (j / 64 < i / 64) are not written: the greedy pass never reads them.
// cudaErrorInvalidValue for n past 64 * 65535 (one grid row per 64 candidates).
cudaError_t LaunchNmsMask(const float* boxes, const int32_t* order, int64_t n,
                          bool center_point_box, float iou_threshold, uint64_t* mask,
                          cudaStream_t stream);

// RoiAlign of X (n, c, h, w) over `rois` rois ([rois, 4], x1 y1 x2 y2) into
// y (rois, c, out_h, out_w); batch_indices INT64 or INT32. A batch index outside [0, n)
// sets *error_flag to 1 and its outputs to 0.
struct RoiAlignArgs {
  int64_t n = 0, c = 0, h = 0, w = 0, rois = 0, out_h = 1, out_w = 1, sampling_ratio = 0;
  float spatial_scale = 1.0f;
  bool half_pixel = true, max_mode = false, int64_indices = true;
};
cudaError_t LaunchRoiAlign(const float* x, const float* rois, const void* batch_indices,
                           float* y, const RoiAlignArgs& a, int32_t* error_flag,
                           cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_DETECTION_LAUNCHERS_H_
