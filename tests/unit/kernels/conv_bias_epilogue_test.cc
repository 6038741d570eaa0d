// The CPU Conv's GEMM paths with a bias and a fused activation (kernels/cpu/conv.cc:
// the GEMM accumulates onto the bias, the activation follows per band): a pointwise
// conv (X read as the col matrix) and an im2col conv, each activation kind, batch 2,
// against a naive double-precision reference.
#include <string>

#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_conv.h"

namespace ndserve::kernels::testing {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // sums of products in another order

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
      const HostTensor want = NaiveConv(x, w, b.Values<float>(), /*stride=*/1, pad, act);
      EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol))
          << k << "x" << k << " activation " << static_cast<int>(act.kind);
    }
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
