// The CPU's depthwise Conv (kernels/cpu/depthwise_conv.cc: padded column phases, rows
// summed eight at a time, stride 2's phases split sixteen floats at a time) against a
// naive double-precision reference, on geometries that reach each of its paths: 3x3 and
// 5x5 (taps fixed at compile time) and 7x7 / 3x2 (taps at run time), strides 1, 2 and 3,
// even and odd left padding, asymmetric pads, dilation, a channel multiplier, rows
// shorter and longer than a vector with a remainder, batch 2, and the fused activations.
// Its 3x3 and 5x5 cases at strides 1 and 2 reach depthwise_conv_kxk.cc instead (tested on
// its own in depthwise_conv_kxk_test.cc); 5x5 at stride 3 keeps the compile-time taps here.
#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_depthwise.h"

namespace ndserve::kernels::testing {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // nine to 49 products, order differs

struct Case {
  std::string name;
  int64_t c, mult, h, w, kh, kw;
  std::vector<int64_t> strides, dilations, pads;  // pads: top, left, bottom, right
  ConvEpilogue act;
};

TEST(DepthwiseConvTest, EveryPathMatchesNaive) {
  ConvEpilogue relu{ConvActivation::kRelu}, clip{ConvActivation::kClip, 0.0f, 6.0f}, none;
  const std::vector<Case> cases = {
      {"3x3 s1 p1 relu", 3, 1, 9, 21, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, relu},
      {"3x3 s2 p1 clip", 4, 1, 11, 37, 3, 3, {2, 2}, {1, 1}, {1, 1, 1, 1}, clip},
      {"3x3 s2 even left pad", 2, 1, 8, 40, 3, 3, {2, 2}, {1, 1}, {0, 2, 1, 0}, none},
      {"3x3 s2 no pad, odd width", 2, 1, 7, 35, 3, 3, {2, 2}, {1, 1}, {0, 0, 0, 0}, none},
      {"5x5 s2 mult 2", 3, 2, 12, 19, 5, 5, {2, 2}, {1, 1}, {2, 2, 2, 2}, relu},
      {"5x5 s3 p2 odd width", 2, 1, 13, 29, 5, 5, {3, 3}, {1, 1}, {2, 2, 2, 2}, clip},
      {"3x2 s(1,3) dilated asym", 2, 2, 10, 23, 3, 2, {1, 3}, {2, 3}, {0, 2, 1, 1}, none},
      {"7x7 s1 p3 width 8", 2, 1, 8, 8, 7, 7, {1, 1}, {1, 1}, {3, 3, 3, 3}, clip},
      {"3x3 s1 width 4", 5, 1, 5, 4, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, none},
  };
  uint32_t seed = 60;
  for (const Case& k : cases) {
    const int64_t n = 2, m = k.c * k.mult;
    const HostTensor x = RandomTensor({n, k.c, k.h, k.w}, ++seed);
    const HostTensor w = RandomTensor({m, 1, k.kh, k.kw}, ++seed, -1.0f, 1.0f);
    const HostTensor b = RandomTensor({m}, ++seed);
    ConvAttrs a;
    a.group = k.c;
    a.strides = k.strides;
    a.dilations = k.dilations;
    a.pads = k.pads;
    a.activation = k.act;
    const int64_t oh =
        (k.h + k.pads[0] + k.pads[2] - (k.kh - 1) * k.dilations[0] - 1) / k.strides[0] + 1;
    const int64_t ow =
        (k.w + k.pads[1] + k.pads[3] - (k.kw - 1) * k.dilations[1] - 1) / k.strides[1] + 1;
    DeviceRunner runner(Device::Cpu());
    const auto got = runner.Run(OpKind::kConv, {x, w, b}, a, 1);
    ASSERT_TRUE(got.ok()) << k.name << ": " << got.status();
    EXPECT_EQ(runner.scratch().held_bytes(), 0u) << k.name << ": scratch not given back";
    const DepthwiseShape shape{n, k.c, k.mult, k.h, k.w, k.kh, k.kw, k.strides, k.dilations, k.pads};
    const HostTensor want = HostTensor::Of<float>(
        {n, m, oh, ow},
        NaiveDepthwise(shape, k.act, x.Values<float>(), w.Values<float>(), b.Values<float>()));
    EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol)) << k.name;
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
