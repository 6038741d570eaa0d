// The CPU Conv's GEMM paths with a bias and a fused activation (kernels/cpu/conv.cc:
// the GEMM accumulates onto the bias, the activation follows per band): a pointwise
// conv (X read as the col matrix) and an im2col conv, each activation kind, batch 2,
// against a naive double-precision reference.
#include <string>

#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // sums of products in another order

// act(conv(x, w) + bias), stride 1, padding p on every side, one group.
std::vector<float> Naive(const HostTensor& x, const HostTensor& w, const std::vector<float>& b,
                         int64_t pad, const ConvEpilogue& act) {
  const int64_t n = x.shape[0], c = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t m = w.shape[0], kh = w.shape[2], kw = w.shape[3];
  const int64_t oh = h + 2 * pad - kh + 1, ow = wd + 2 * pad - kw + 1;
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
                const int64_t ih = r - pad + a, iw = s - pad + e;
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
  return y;
}

TEST(ConvBiasEpilogueTest, PointwiseAndIm2colAddBiasWithEachActivation) {
  const std::vector<ConvEpilogue> acts = {{ConvActivation::kNone},
                                          {ConvActivation::kRelu},
                                          {ConvActivation::kClip, 0.0f, 6.0f},
                                          {ConvActivation::kHardSwish},
                                          {ConvActivation::kSigmoid}};
  uint32_t seed = 100;
  for (int64_t k : {1, 3}) {
    for (const ConvEpilogue& act : acts) {
      const HostTensor x = RandomTensor({2, 5, 7, 9}, ++seed);
      const HostTensor w = RandomTensor({6, 5, k, k}, ++seed, -1.0f, 1.0f);
      const HostTensor b = RandomTensor({6}, ++seed);
      const int64_t pad = k / 2;
      ConvAttrs a;
      a.pads = {pad, pad, pad, pad};
      a.activation = act;
      DeviceRunner runner(Device::Cpu());
      const auto got = runner.Run(OpKind::kConv, {x, w, b}, a, 1);
      ASSERT_TRUE(got.ok()) << got.status();
      const HostTensor want =
          HostTensor::Of<float>({2, 6, 7, 9}, Naive(x, w, b.Values<float>(), pad, act));
      EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol))
          << k << "x" << k << " activation " << static_cast<int>(act.kind);
    }
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
