// GridSample: one thread per output element, with the CPU kernel's taps
// (kernels/grid_sample_coord.h) summed in the same order, each product and sum rounded on
// its own (no FMA contraction), as on the CPU.
#include "kernels/cuda/conv_launchers.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/grid_sample_coord.h"

namespace ndserve::kernels::gpu {
namespace {

__global__ void GridSampleKernel(const float* x, const float* grid, float* y, GridSampleArgs a,
                                 int64_t total) {
  const int64_t positions = a.out_h * a.out_w;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t p = i % positions;
    const int64_t ch = (i / positions) % a.c;
    const int64_t img = i / (positions * a.c);
    const float* g = grid + (img * positions + p) * 2;
    const GridTaps t =
        GridSampleTaps(g[0], g[1], a.in_h, a.in_w, a.mode, a.padding, a.align_corners);
    const float* plane = x + (img * a.c + ch) * a.in_h * a.in_w;
    float acc = 0.0f;
    for (int k = 0; k < t.n; ++k) {
      if (t.at[k] >= 0) acc = __fadd_rn(acc, __fmul_rn(plane[t.at[k]], t.w[k]));
    }
    y[i] = acc;
  }
}

}  // namespace

cudaError_t LaunchGridSample(const float* x, const float* grid, float* y, const GridSampleArgs& a,
                             cudaStream_t stream) {
  const int64_t total = a.n * a.c * a.out_h * a.out_w;
  if (total == 0) return cudaSuccess;
  GridSampleKernel<<<GridFor(total), kBlock, 0, stream>>>(x, grid, y, a, total);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
