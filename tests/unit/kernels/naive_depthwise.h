#ifndef NDSERVE_TESTS_UNIT_KERNELS_NAIVE_DEPTHWISE_H_
#define NDSERVE_TESTS_UNIT_KERNELS_NAIVE_DEPTHWISE_H_

// The reference the CPU depthwise Conv's tests compare against: act(depthwise conv(x, w)
// + bias) summed in double precision, NCHW, `mult` outputs per input channel, strides,
// dilations and pads (top, left, bottom, right) per axis.

#include <cstdint>
#include <vector>

#include "kernels/conv_activation.h"
#include "kernels/node_attrs.h"

namespace ndserve::kernels::testing {

struct DepthwiseShape {
  int64_t n, c, mult, h, w, kh, kw;
  std::vector<int64_t> strides, dilations, pads;  // pads: top, left, bottom, right

  int64_t out_h() const {
    return (h + pads[0] + pads[2] - (kh - 1) * dilations[0] - 1) / strides[0] + 1;
  }
  int64_t out_w() const {
    return (w + pads[1] + pads[3] - (kw - 1) * dilations[1] - 1) / strides[1] + 1;
  }
};

// The Conv node attributes of shape `k` (groups, strides, dilations, pads) with `act`.
inline ConvAttrs AttrsOf(const DepthwiseShape& k, const ConvEpilogue& act = {}) {
  ConvAttrs a;
  a.group = k.c;
  a.strides = k.strides;
  a.dilations = k.dilations;
  a.pads = k.pads;
  a.activation = act;
  return a;
}

// x [n, c, h, w], wt [c * mult, 1, kh, kw], bias [c * mult] or empty (no bias).
inline std::vector<float> NaiveDepthwise(const DepthwiseShape& k, const ConvEpilogue& act,
                                         const std::vector<float>& x,
                                         const std::vector<float>& wt,
                                         const std::vector<float>& bias) {
  const int64_t m = k.c * k.mult, oh = k.out_h(), ow = k.out_w();
  std::vector<float> y(k.n * m * oh * ow);
  for (int64_t i = 0; i < k.n; ++i) {
    for (int64_t o = 0; o < m; ++o) {
      const int64_t ci = o / k.mult;
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t s = 0; s < ow; ++s) {
          double acc = bias.empty() ? 0.0 : bias[o];
          for (int64_t a = 0; a < k.kh; ++a) {
            for (int64_t b = 0; b < k.kw; ++b) {
              const int64_t ih = r * k.strides[0] - k.pads[0] + a * k.dilations[0];
              const int64_t iw = s * k.strides[1] - k.pads[1] + b * k.dilations[1];
              if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
              acc += static_cast<double>(x[((i * k.c + ci) * k.h + ih) * k.w + iw]) *
                     wt[(o * k.kh + a) * k.kw + b];
            }
          }
          y[((i * m + o) * oh + r) * ow + s] = act(static_cast<float>(acc));
        }
      }
    }
  }
  return y;
}

}  // namespace ndserve::kernels::testing

#endif  // NDSERVE_TESTS_UNIT_KERNELS_NAIVE_DEPTHWISE_H_
