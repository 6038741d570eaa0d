#ifndef NDSERVE_TESTS_UNIT_KERNELS_NAIVE_CONV_H_
#define NDSERVE_TESTS_UNIT_KERNELS_NAIVE_CONV_H_

// The reference the CPU Conv paths' tests compare against: act(conv(x, w) + bias) summed
// in double precision, NCHW, one group, the same stride and padding on every side.

#include <cstdint>
#include <vector>

#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {

// Output dims are (in + 2 * pad - k) / stride + 1 per axis.
inline HostTensor NaiveConv(const HostTensor& x, const HostTensor& w, const std::vector<float>& b,
                            int64_t stride, int64_t pad, const ConvEpilogue& act) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t m = w.shape[0], kh = w.shape[2], kw = w.shape[3];
  const int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (wd + 2 * pad - kw) / stride + 1;
  const std::vector<float> xv = x.Values<float>(), wv = w.Values<float>();
  std::vector<float> y(n * m * oh * ow);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < m; ++o) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t s = 0; s < ow; ++s) {
          double acc = b[o];
          for (int64_t ci = 0; ci < c; ++ci) {
            for (int64_t a = 0; a < kh; ++a) {
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t ih = r * stride - pad + a, iw = s * stride - pad + e;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                acc += static_cast<double>(xv[((i * c + ci) * h + ih) * wd + iw]) *
                       wv[((o * c + ci) * kh + a) * kw + e];
              }
            }
          }
          y[((i * m + o) * oh + r) * ow + s] = act(static_cast<float>(acc));
        }
      }
    }
  }
  return HostTensor::Of<float>({n, m, oh, ow}, y);
}

// The same with any geometry: strides {sh, sw}, dilations {dh, dw} and pads {top, left,
// bottom, right}; output dims (in + pads - dil * (k - 1) - 1) / stride + 1 per axis.
inline HostTensor NaiveConv2d(const HostTensor& x, const HostTensor& w,
                              const std::vector<float>& b, const std::vector<int64_t>& strides,
                              const std::vector<int64_t>& dils, const std::vector<int64_t>& pads,
                              const ConvEpilogue& act) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t m = w.shape[0], kh = w.shape[2], kw = w.shape[3];
  const int64_t oh = (h + pads[0] + pads[2] - dils[0] * (kh - 1) - 1) / strides[0] + 1;
  const int64_t ow = (wd + pads[1] + pads[3] - dils[1] * (kw - 1) - 1) / strides[1] + 1;
  const std::vector<float> xv = x.Values<float>(), wv = w.Values<float>();
  std::vector<float> y(n * m * oh * ow);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < m; ++o) {
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t s = 0; s < ow; ++s) {
          double acc = b.empty() ? 0.0 : b[o];
          for (int64_t ci = 0; ci < c; ++ci) {
            for (int64_t a = 0; a < kh; ++a) {
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t ih = r * strides[0] - pads[0] + a * dils[0];
                const int64_t iw = s * strides[1] - pads[1] + e * dils[1];
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                acc += static_cast<double>(xv[((i * c + ci) * h + ih) * wd + iw]) *
                       wv[((o * c + ci) * kh + a) * kw + e];
              }
            }
          }
          y[((i * m + o) * oh + r) * ow + s] = act(static_cast<float>(acc));
        }
      }
    }
  }
  return HostTensor::Of<float>({n, m, oh, ow}, y);
}

}  // namespace ndserve::kernels::testing

#endif  // NDSERVE_TESTS_UNIT_KERNELS_NAIVE_CONV_H_
