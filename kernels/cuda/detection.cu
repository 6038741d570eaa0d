// NonMaxSuppression's overlap mask and RoiAlign on CUDA, over the arithmetic the CPU
// kernels use (kernels/detection_coord.h), so both devices decide the same overlaps and
// write the same bits.
#include "kernels/cuda/detection_launchers.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/detection_coord.h"

namespace ndserve::kernels::gpu {
namespace {

// One block of 64 threads per 64 x 64 tile (rows: blockIdx.y, columns: blockIdx.x) on or
// right of the diagonal: the column tile's boxes go to shared memory, and each thread
// builds its row's word for that tile.
__global__ void NmsMaskKernel(const float* boxes, const int32_t* order, int64_t n,
                              bool center_point_box, float iou_threshold, uint64_t* mask) {
  const int64_t row_tile = blockIdx.y, col_tile = blockIdx.x;
  if (col_tile < row_tile) return;
  const int64_t words = (n + kNmsMaskBits - 1) / kNmsMaskBits;
  const int64_t row0 = row_tile * kNmsMaskBits, col0 = col_tile * kNmsMaskBits;
  const int rows = n - row0 < kNmsMaskBits ? static_cast<int>(n - row0) : kNmsMaskBits;
  const int cols = n - col0 < kNmsMaskBits ? static_cast<int>(n - col0) : kNmsMaskBits;
  __shared__ NmsBox tile[kNmsMaskBits];
  const int t = threadIdx.x;
  if (t < cols) tile[t] = NmsDecodeBox(boxes + 4 * static_cast<int64_t>(order[col0 + t]),
                                       center_point_box);
  __syncthreads();
  if (t >= rows) return;
  const int64_t i = row0 + t;
  const NmsBox me = NmsDecodeBox(boxes + 4 * static_cast<int64_t>(order[i]), center_point_box);
  uint64_t bits = 0;
  for (int j = row_tile == col_tile ? t + 1 : 0; j < cols; ++j) {
    if (NmsSuppresses(me, tile[j], iou_threshold)) bits |= uint64_t{1} << j;
  }
  mask[i * words + col_tile] = bits;
}

// One thread per output element (roi, channel, bin).
__global__ void RoiAlignKernel(const float* x, const float* rois, const void* batch_indices,
                               float* y, RoiAlignArgs a, int32_t* error_flag, int64_t total) {
  const int64_t bins = a.out_h * a.out_w;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t bin = i % bins;
    const int64_t ch = (i / bins) % a.c;
    const int64_t r = i / (bins * a.c);
    const int64_t b = a.int64_indices ? static_cast<const int64_t*>(batch_indices)[r]
                                      : static_cast<const int32_t*>(batch_indices)[r];
    if (b < 0 || b >= a.n) {
      *error_flag = 1;
      y[i] = 0.0f;
      continue;
    }
    const RoiAlignGeometry g = RoiAlignGeometryOf(rois + r * 4, a.spatial_scale, a.half_pixel,
                                                  a.out_h, a.out_w, a.sampling_ratio);
    const float* plane = x + (b * a.c + ch) * a.h * a.w;
    y[i] = RoiAlignBin(plane, g, bin / a.out_w, bin % a.out_w, a.h, a.w, a.max_mode);
  }
}

}  // namespace

cudaError_t LaunchNmsMask(const float* boxes, const int32_t* order, int64_t n,
                          bool center_point_box, float iou_threshold, uint64_t* mask,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int64_t tiles = (n + kNmsMaskBits - 1) / kNmsMaskBits;
  if (tiles > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(tiles));
  NmsMaskKernel<<<grid, kNmsMaskBits, 0, stream>>>(boxes, order, n, center_point_box,
                                                    iou_threshold, mask);
  return cudaGetLastError();
}

cudaError_t LaunchRoiAlign(const float* x, const float* rois, const void* batch_indices,
                           float* y, const RoiAlignArgs& a, int32_t* error_flag,
                           cudaStream_t stream) {
  const int64_t total = a.rois * a.c * a.out_h * a.out_w;
  if (total == 0) return cudaSuccess;
  RoiAlignKernel<<<GridFor(total), kBlock, 0, stream>>>(x, rois, batch_indices, y, a,
                                                        error_flag, total);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
