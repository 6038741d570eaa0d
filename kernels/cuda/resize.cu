// Resize: one thread per output element, nearest or bilinear over the last two dims,
// with the CPU kernel's coordinate arithmetic (kernels/resize_coord.h).
#include "kernels/cuda/conv_launchers.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/resize_coord.h"

namespace ndserve::kernels::gpu {
namespace {

__global__ void ResizeKernel(const float* x, float* y, ResizeArgs a, int64_t total) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t c = i % a.out_w;
    const int64_t r = (i / a.out_w) % a.out_h;
    const int64_t p = i / (a.out_w * a.out_h);
    const float* xp = x + p * a.in_h * a.in_w;
    const float sy = ResizeSourceCoord(a.coord, static_cast<float>(r), a.scale_h, a.in_h, a.out_h);
    const float sx = ResizeSourceCoord(a.coord, static_cast<float>(c), a.scale_w, a.in_w, a.out_w);
    if (!a.linear) {
      y[i] = xp[ResizeNearestIndex(a.nearest, sy, a.in_h) * a.in_w +
                ResizeNearestIndex(a.nearest, sx, a.in_w)];
      continue;
    }
    int64_t r0, r1, c0, c1;
    float wy, wx;
    ResizeLinearTaps(sy, a.in_h, &r0, &r1, &wy);
    ResizeLinearTaps(sx, a.in_w, &c0, &c1, &wx);
    const float top =
        __fadd_rn(__fmul_rn(xp[r0 * a.in_w + c0], 1.0f - wx), __fmul_rn(xp[r0 * a.in_w + c1], wx));
    const float bottom =
        __fadd_rn(__fmul_rn(xp[r1 * a.in_w + c0], 1.0f - wx), __fmul_rn(xp[r1 * a.in_w + c1], wx));
    y[i] = __fadd_rn(__fmul_rn(top, 1.0f - wy), __fmul_rn(bottom, wy));
  }
}

}  // namespace

cudaError_t LaunchResize(const float* x, float* y, const ResizeArgs& a, cudaStream_t stream) {
  const int64_t total = a.planes * a.out_h * a.out_w;
  if (total == 0) return cudaSuccess;
  ResizeKernel<<<GridFor(total), kBlock, 0, stream>>>(x, y, a, total);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
