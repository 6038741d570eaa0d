// MaxPool, AveragePool (one thread per output) and the global pools (one warp per plane).
#include <cmath>

#include "kernels/cuda/conv_launchers.h"
#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

// Taps first, first + step, ... < end of a window starting at `start`, clipped to the
// input; `padded` counts the taps inside input plus padding (count_include_pad).
struct Taps {
  int64_t first, end, step, padded;
};

__device__ Taps ClipTaps(int64_t start, int64_t k, int64_t dil, int64_t size, int64_t pad_end) {
  Taps t{start, start + (k - 1) * dil + 1, dil, 0};
  const int64_t limit = t.end < size + pad_end ? t.end : size + pad_end;
  t.padded = limit > start ? (limit - start + dil - 1) / dil : 0;
  if (t.first < 0) t.first += ((-t.first + dil - 1) / dil) * dil;
  if (t.end > size) t.end = size;
  return t;
}

template <bool kMax>
__global__ void PoolKernel(const float* x, float* y, int64_t* indices, ConvWindowArgs w,
                           bool count_include_pad, int64_t total) {
  const int64_t plane_out = w.col_plane(), plane_in = w.img_plane(), hw = w.img_h * w.img_w;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t s = i % w.col_w;
    const int64_t r = (i / w.col_w) % w.col_h;
    const int64_t z = (i / (w.col_w * w.col_h)) % w.col_d;
    const int64_t p = i / plane_out;
    const float* xp = x + p * plane_in;
    const Taps ds = ClipTaps(z * w.sd - w.pf, w.kd, w.dd, w.img_d, w.pk);
    const Taps hs = ClipTaps(r * w.sh - w.pt, w.kh, w.dh, w.img_h, w.pb);
    const Taps ws = ClipTaps(s * w.sw - w.pl, w.kw, w.dw, w.img_w, w.pr);
    if (kMax) {
      float best = -INFINITY;
      int64_t best_at = -1;
      for (int64_t d = ds.first; d < ds.end; d += ds.step) {
        for (int64_t h = hs.first; h < hs.end; h += hs.step) {
          for (int64_t c = ws.first; c < ws.end; c += ws.step) {
            const int64_t at = d * hw + h * w.img_w + c;
            const float v = xp[at];
            if (best_at < 0 || v > best || (isnan(v) && !isnan(best))) {
              best = v;
              best_at = at;
            }
          }
        }
      }
      y[i] = best;
      if (indices != nullptr) indices[i] = best_at < 0 ? -1 : p * plane_in + best_at;
    } else {
      float sum = 0.0f;
      int64_t count = 0;
      for (int64_t d = ds.first; d < ds.end; d += ds.step) {
        for (int64_t h = hs.first; h < hs.end; h += hs.step) {
          for (int64_t c = ws.first; c < ws.end; c += ws.step) {
            sum += xp[d * hw + h * w.img_w + c];
            ++count;
          }
        }
      }
      if (count_include_pad) count = ds.padded * hs.padded * ws.padded;
      y[i] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
    }
  }
}

__global__ void GlobalPoolKernel(const float* x, float* y, int64_t planes, int64_t plane,
                                 bool max) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = GridThreads() / 32;
  for (int64_t p = GlobalThread() / 32; p < planes; p += warps) {
    const float* xp = x + p * plane;
    float acc = max ? -INFINITY : 0.0f;
    for (int64_t i = lane; i < plane; i += 32) acc = max ? fmaxf(acc, xp[i]) : acc + xp[i];
    acc = max ? WarpMax(acc) : WarpSum(acc) / static_cast<float>(plane);
    if (lane == 0) y[p] = acc;
  }
}

}  // namespace

cudaError_t LaunchMaxPool(const float* x, float* y, int64_t* indices, int64_t planes,
                          const ConvWindowArgs& w, cudaStream_t stream) {
  const int64_t total = planes * w.col_plane();
  if (total == 0) return cudaSuccess;
  PoolKernel<true><<<GridFor(total), kBlock, 0, stream>>>(x, y, indices, w, false, total);
  return cudaGetLastError();
}

cudaError_t LaunchAveragePool(const float* x, float* y, int64_t planes, const ConvWindowArgs& w,
                              bool count_include_pad, cudaStream_t stream) {
  const int64_t total = planes * w.col_plane();
  if (total == 0) return cudaSuccess;
  PoolKernel<false>
      <<<GridFor(total), kBlock, 0, stream>>>(x, y, nullptr, w, count_include_pad, total);
  return cudaGetLastError();
}

cudaError_t LaunchGlobalPool(const float* x, float* y, int64_t planes, int64_t plane, bool max,
                             cudaStream_t stream) {
  if (planes == 0) return cudaSuccess;
  GlobalPoolKernel<<<GridFor(planes * 32), kBlock, 0, stream>>>(x, y, planes, plane, max);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
