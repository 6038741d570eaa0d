// Resize: one thread per output element, nearest, linear or cubic, with the CPU kernel's
// taps (kernels/resize_coord.h) and its order of sums; every product and sum is rounded
// on its own (no FMA contraction), as on the CPU.
#include "kernels/cuda/conv_launchers.h"
#include "kernels/cuda/device_util.cuh"
#include "kernels/resize_coord.h"

namespace ndserve::kernels::gpu {
namespace {

struct DimTaps {
  int n;
  int64_t i[4];
  float w[4];
};

__device__ DimTaps TapsOf(const ResizeArgs& a, int mode, int64_t o, float scale, int64_t in_len,
                          int64_t out_len) {
  DimTaps t;
  t.n = ResizeTapsOf(mode, a.coord, a.nearest, a.cubic_a, a.exclude_outside, o, scale, in_len,
                     out_len, t.i, t.w);
  return t;
}

__global__ void ResizeKernel(const float* x, float* y, ResizeArgs a, int64_t total) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t c = i % a.out_w;
    const int64_t r = (i / a.out_w) % a.out_h;
    const int64_t z = (i / (a.out_w * a.out_h)) % a.out_d;
    const int64_t p = i / (a.out_w * a.out_h * a.out_d);
    const int64_t in_plane = a.in_h * a.in_w;
    const float* xv = x + p * a.in_d * in_plane;
    DimTaps dz;
    if (a.depth && a.mode != 2) {
      dz = TapsOf(a, a.mode, z, a.scale_d, a.in_d, a.out_d);
    } else {
      dz.n = 1;
      dz.i[0] = z;
      dz.w[0] = 1.0f;
    }
    const DimTaps dr = TapsOf(a, a.mode, r, a.scale_h, a.in_h, a.out_h);
    const DimTaps dc = TapsOf(a, a.mode, c, a.scale_w, a.in_w, a.out_w);
    if (a.mode == 0) {
      y[i] = xv[dz.i[0] * in_plane + dr.i[0] * a.in_w + dc.i[0]];
      continue;
    }
    float acc = 0.0f;
    for (int kz = 0; kz < dz.n; ++kz) {
      const float* xs = xv + dz.i[kz] * in_plane;
      float plane = 0.0f;
      for (int kr = 0; kr < dr.n; ++kr) {
        const float* xr = xs + dr.i[kr] * a.in_w;
        float line = __fmul_rn(xr[dc.i[0]], dc.w[0]);
        for (int kc = 1; kc < dc.n; ++kc) line = __fadd_rn(line, __fmul_rn(xr[dc.i[kc]], dc.w[kc]));
        plane = kr == 0 ? __fmul_rn(line, dr.w[0]) : __fadd_rn(plane, __fmul_rn(line, dr.w[kr]));
      }
      acc = kz == 0 ? __fmul_rn(plane, dz.w[0]) : __fadd_rn(acc, __fmul_rn(plane, dz.w[kz]));
    }
    y[i] = acc;
  }
}

}  // namespace

cudaError_t LaunchResize(const float* x, float* y, const ResizeArgs& a, cudaStream_t stream) {
  const int64_t total = a.planes * a.out_d * a.out_h * a.out_w;
  if (total == 0) return cudaSuccess;
  ResizeKernel<<<GridFor(total), kBlock, 0, stream>>>(x, y, a, total);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
