// The CPU Conv's folded batch (kernels/cpu/conv.cc: FoldedConv): a one-group conv whose
// output plane is at most K / 2 puts several images' col matrices side by side in one
// GEMM and copies the product back to NCHW. Against a naive double-precision reference:
// all of a batch of 3 in one GEMM (stride 2, padding, Relu), and a batch of 3 in GEMMs of
// 2 images, the last one short (Clip).
#include <string>

#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_conv.h"

namespace ndserve::kernels::testing {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // sums of products in another order

struct Case {
  std::string name;
  int64_t c, m, h, w, stride, pad;
  ConvEpilogue act;
};

TEST(ConvBatchFoldTest, FoldedImagesMatchNaive) {
  const std::vector<Case> cases = {
      // K = 72, P = 5 x 6 = 30: the 3 images' col (26 KB) in one GEMM.
      {"one GEMM", 8, 5, 9, 11, 2, 1, {ConvActivation::kRelu}},
      // K = 2304, P = 20 x 20 = 400: 3.7 MB of col per image, 2 images per GEMM.
      {"GEMMs of 2, last short", 256, 4, 22, 22, 1, 0, {ConvActivation::kClip, -0.5f, 0.5f}},
      // K = 2304, P = 20 x 40 = 800 > K / 2: not folded, the per-image bands instead.
      {"not folded", 256, 3, 22, 42, 1, 0, {ConvActivation::kNone}},
  };
  uint32_t seed = 120;
  for (const Case& k : cases) {
    const int64_t n = 3;
    const HostTensor x = RandomTensor({n, k.c, k.h, k.w}, ++seed);
    const HostTensor w = RandomTensor({k.m, k.c, 3, 3}, ++seed, -0.1f, 0.1f);
    const HostTensor b = RandomTensor({k.m}, ++seed);
    ConvAttrs a;
    a.strides = {k.stride, k.stride};
    a.pads = {k.pad, k.pad, k.pad, k.pad};
    a.activation = k.act;
    DeviceRunner runner(Device::Cpu());
    const auto got = runner.Run(OpKind::kConv, {x, w, b}, a, 1);
    ASSERT_TRUE(got.ok()) << k.name << ": " << got.status();
    EXPECT_EQ(runner.scratch().held_bytes(), 0u) << k.name << ": scratch not given back";
    const HostTensor want = NaiveConv(x, w, b.Values<float>(), k.stride, k.pad, k.act);
    EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol)) << k.name;
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
