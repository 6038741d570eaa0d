// Conv's device kernels: im2col and its adjoint col2im (ConvTranspose), a direct
// depthwise convolution, the bias fill the GEMMs accumulate onto and the fused
// activation applied after them (kernels/conv_activation.h).
#include "kernels/cuda/conv_launchers.h"
#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

__global__ void Im2ColKernel(const float* img, ConvWindowArgs w, float* col, int64_t total) {
  const int64_t cols = w.col_plane();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t pos = i % cols;
    const int64_t row = i / cols;  // ((c * kd + kz) * kh + ki) * kw + kj
    const int64_t kj = row % w.kw;
    const int64_t ki = (row / w.kw) % w.kh;
    const int64_t kz = (row / (w.kw * w.kh)) % w.kd;
    const int64_t c = row / w.taps();
    const int64_t iz = (pos / (w.col_h * w.col_w)) * w.sd - w.pf + kz * w.dd;
    const int64_t ih = ((pos / w.col_w) % w.col_h) * w.sh - w.pt + ki * w.dh;
    const int64_t iw = (pos % w.col_w) * w.sw - w.pl + kj * w.dw;
    const bool inside =
        iz >= 0 && iz < w.img_d && ih >= 0 && ih < w.img_h && iw >= 0 && iw < w.img_w;
    col[i] = inside ? img[((c * w.img_d + iz) * w.img_h + ih) * w.img_w + iw] : 0.0f;
  }
}

// Window position q along one dim that tap k of reads pixel `at`, or -1 when none does.
__device__ int64_t ReaderOf(int64_t at, int64_t pad, int64_t k, int64_t dil, int64_t stride,
                            int64_t positions) {
  const int64_t rq = at + pad - k * dil;  // = q * stride for the position that reads it
  if (rq < 0 || rq % stride != 0 || rq / stride >= positions) return -1;
  return rq / stride;
}

__global__ void Col2ImKernel(const float* col, ConvWindowArgs w, float* img, int64_t total) {
  const int64_t cols = w.col_plane();
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t iw = i % w.img_w;
    const int64_t ih = (i / w.img_w) % w.img_h;
    const int64_t iz = (i / (w.img_w * w.img_h)) % w.img_d;
    const int64_t c = i / w.img_plane();
    float sum = 0.0f;
    for (int64_t kz = 0; kz < w.kd; ++kz) {
      const int64_t qz = ReaderOf(iz, w.pf, kz, w.dd, w.sd, w.col_d);
      if (qz < 0) continue;
      for (int64_t ki = 0; ki < w.kh; ++ki) {
        const int64_t qh = ReaderOf(ih, w.pt, ki, w.dh, w.sh, w.col_h);
        if (qh < 0) continue;
        for (int64_t kj = 0; kj < w.kw; ++kj) {
          const int64_t qw = ReaderOf(iw, w.pl, kj, w.dw, w.sw, w.col_w);
          if (qw < 0) continue;
          const int64_t row = ((c * w.kd + kz) * w.kh + ki) * w.kw + kj;
          sum += col[row * cols + (qz * w.col_h + qh) * w.col_w + qw];
        }
      }
    }
    img[i] += sum;
  }
}

__global__ void DepthwiseKernel(const float* x, const float* weight, const float* bias, float* y,
                                int64_t mg, ConvWindowArgs w, ConvEpilogue act, int64_t total) {
  const int64_t cols = w.col_plane();
  const int64_t m_total = w.channels * mg;
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t s = i % w.col_w;
    const int64_t r = (i / w.col_w) % w.col_h;
    const int64_t z = (i / (w.col_w * w.col_h)) % w.col_d;
    const int64_t m = (i / cols) % m_total;
    const int64_t n = i / (cols * m_total);
    const float* xc = x + (n * w.channels + m / mg) * w.img_plane();
    const float* wm = weight + m * w.taps();
    float sum = bias != nullptr ? bias[m] : 0.0f;
    for (int64_t kz = 0; kz < w.kd; ++kz) {
      const int64_t iz = z * w.sd - w.pf + kz * w.dd;
      if (iz < 0 || iz >= w.img_d) continue;
      for (int64_t ki = 0; ki < w.kh; ++ki) {
        const int64_t ih = r * w.sh - w.pt + ki * w.dh;
        if (ih < 0 || ih >= w.img_h) continue;
        for (int64_t kj = 0; kj < w.kw; ++kj) {
          const int64_t iw = s * w.sw - w.pl + kj * w.dw;
          if (iw < 0 || iw >= w.img_w) continue;
          sum += wm[(kz * w.kh + ki) * w.kw + kj] * xc[(iz * w.img_h + ih) * w.img_w + iw];
        }
      }
    }
    y[i] = act(sum);
  }
}

__global__ void ConvActivationKernel(float* y, ConvEpilogue act, int64_t total) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) y[i] = act(y[i]);
}

__global__ void FillChannelBiasKernel(const float* bias, float* y, int64_t m, int64_t plane,
                                      int64_t total) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    y[i] = bias != nullptr ? bias[(i / plane) % m] : 0.0f;
  }
}

}  // namespace

cudaError_t LaunchIm2Col(const float* img, const ConvWindowArgs& w, float* col,
                         cudaStream_t stream) {
  const int64_t total = w.channels * w.taps() * w.col_plane();
  if (total == 0) return cudaSuccess;
  Im2ColKernel<<<GridFor(total), kBlock, 0, stream>>>(img, w, col, total);
  return cudaGetLastError();
}

cudaError_t LaunchCol2Im(const float* col, const ConvWindowArgs& w, float* img,
                         cudaStream_t stream) {
  const int64_t total = w.channels * w.img_plane();
  if (total == 0) return cudaSuccess;
  Col2ImKernel<<<GridFor(total), kBlock, 0, stream>>>(col, w, img, total);
  return cudaGetLastError();
}

cudaError_t LaunchDepthwiseConv(const float* x, const float* weight, const float* bias, float* y,
                                int64_t n, int64_t mg, const ConvWindowArgs& w,
                                const ConvEpilogue& act, cudaStream_t stream) {
  const int64_t total = n * w.channels * mg * w.col_plane();
  if (total == 0) return cudaSuccess;
  DepthwiseKernel<<<GridFor(total), kBlock, 0, stream>>>(x, weight, bias, y, mg, w, act, total);
  return cudaGetLastError();
}

cudaError_t LaunchConvActivation(float* y, int64_t count, const ConvEpilogue& act,
                                 cudaStream_t stream) {
  if (count == 0 || act.kind == ConvActivation::kNone) return cudaSuccess;
  ConvActivationKernel<<<GridFor(count), kBlock, 0, stream>>>(y, act, count);
  return cudaGetLastError();
}

cudaError_t LaunchFillChannelBias(const float* bias, float* y, int64_t n, int64_t m, int64_t plane,
                                  cudaStream_t stream) {
  const int64_t total = n * m * plane;
  if (total == 0) return cudaSuccess;
  FillChannelBiasKernel<<<GridFor(total), kBlock, 0, stream>>>(bias, y, m, plane, total);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
