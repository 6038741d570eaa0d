// The direct conv (kernels/cpu/direct_conv.h): one-group convs with W packed at load read
// the padded image in place through an offset table. Odd shapes against a naive double-
// precision reference, through the Conv kernel: kernel sizes 1 (padded or strided, so not
// pointwise), 3, 5 and 7, strides 1 and 2, dilation, asymmetric pads, widths that are no
// multiple of 16, channel counts that are no multiple of anything, M not a multiple of
// 6, K past one K block, batch 1 and 3, every fused activation, with and without bias.
#include <string>

#include "gtest/gtest.h"
#include "kernels/conv_geometry.h"
#include "kernels/cpu/direct_conv.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_conv.h"

namespace ndserve::kernels::testing {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // sums of products in another order

struct Case {
  std::string name;
  int64_t n, c, m, h, w, kh, kw;
  std::vector<int64_t> strides, dils, pads;  // pads: top, left, bottom, right
  ConvEpilogue act;
  bool bias;
};

std::vector<Case> Cases() {
  const ConvEpilogue none, relu{ConvActivation::kRelu}, clip{ConvActivation::kClip, -0.5f, 1.5f},
      hswish{ConvActivation::kHardSwish}, sigmoid{ConvActivation::kSigmoid};
  return {
      {"3x3 s1 p1", 1, 5, 7, 10, 9, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, relu, true},
      {"3x3 s1 batch 3, K > 256", 3, 31, 13, 11, 19, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, none,
       false},
      {"3x3 s2 asymmetric pads", 3, 7, 11, 13, 17, 3, 3, {2, 2}, {1, 1}, {0, 1, 2, 0}, clip, true},
      {"5x5 s1 asymmetric pads", 1, 3, 5, 12, 23, 5, 5, {1, 1}, {1, 1}, {2, 0, 1, 3}, hswish, true},
      {"7x7 s2 p3 (a stem)", 1, 3, 17, 30, 29, 7, 7, {2, 2}, {1, 1}, {3, 3, 3, 3}, none, true},
      {"7x7 s2 batch 3", 3, 2, 4, 15, 18, 7, 7, {2, 2}, {1, 1}, {3, 2, 1, 3}, sigmoid, false},
      {"1x1 s2 (a downsample)", 1, 37, 19, 14, 14, 1, 1, {2, 2}, {1, 1}, {0, 0, 0, 0}, relu, true},
      {"1x1 padded", 3, 9, 8, 5, 7, 1, 1, {1, 1}, {1, 1}, {1, 0, 0, 2}, none, true},
      {"3x3 dilation 2", 1, 6, 10, 13, 14, 3, 3, {1, 1}, {2, 2}, {2, 2, 2, 2}, relu, true},
      {"3x3 s3 dilation 2", 3, 5, 7, 17, 20, 3, 3, {3, 3}, {2, 2}, {2, 1, 0, 2}, relu, true},
      {"3x5 strides 2x1", 3, 4, 9, 9, 21, 3, 5, {2, 1}, {1, 1}, {1, 2, 1, 2}, clip, false},
      {"3x3 s1 many channels", 1, 70, 33, 8, 8, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}, relu, true},
      {"3x3 s1 long rows (many tiles)", 1, 4, 64, 40, 61, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1},
       hswish, true},
  };
}

TEST(DirectConvTest, MatchesNaiveOverOddShapes) {
  uint32_t seed = 900;
  for (const Case& k : Cases()) {
    const HostTensor x = RandomTensor({k.n, k.c, k.h, k.w}, ++seed);
    const HostTensor w = RandomTensor({k.m, k.c, k.kh, k.kw}, ++seed, -0.2f, 0.2f);
    const HostTensor b = RandomTensor({k.m}, ++seed);
    ConvAttrs a;
    a.strides = k.strides;
    a.dilations = k.dils;
    a.pads = k.pads;
    a.activation = k.act;
    const Shape xs = x.shape, ws = w.shape;
    const auto g =
        MakeConvGeometry("Conv", a, ShapeSpan(xs).subspan(2), ShapeSpan(ws).subspan(2), false);
    ASSERT_TRUE(g.ok()) << k.name << ": " << g.status();
    ASSERT_TRUE(cpu::DirectConvSuits(*g, k.c)) << k.name;
    TensorView wv{const_cast<uint8_t*>(w.bytes.data()), w.dtype, w.shape, Device::Cpu()};
    const auto packed = cpu::PackNodeWeight(OpKind::kConv, a, wv);
    ASSERT_NE(packed, nullptr) << k.name;
    DeviceRunner runner(Device::Cpu());
    runner.set_packed_weight(packed.get());
    std::vector<HostTensor> in = {x, w};
    if (k.bias) in.push_back(b);
    const auto got = runner.Run(OpKind::kConv, in, a, 1);
    ASSERT_TRUE(got.ok()) << k.name << ": " << got.status();
    const HostTensor want = NaiveConv2d(x, w, k.bias ? b.Values<float>() : std::vector<float>{},
                                        k.strides, k.dils, k.pads, k.act);
    ASSERT_EQ((*got)[0].shape, want.shape) << k.name;
    EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol)) << k.name;
  }
}

// The direct conv called alone, on scratch that starts out full of NaNs: every float it
// reads that feeds a kept output is one it wrote (padding, slack), so none leaks through.
// Also a pointwise conv, which Conv sends to PackedGemm but the kernel computes as well
// (gemm_benchmark compares the two).
TEST(DirectConvTest, ReadsNoScratchItDidNotWrite) {
  uint32_t seed = 1900;
  std::vector<Case> cases = Cases();
  cases.push_back({"pointwise", 3, 13, 11, 9, 7, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, {}, true});
  for (const Case& k : cases) {
    const HostTensor x = RandomTensor({k.n, k.c, k.h, k.w}, ++seed);
    const HostTensor w = RandomTensor({k.m, k.c, k.kh, k.kw}, ++seed, -0.2f, 0.2f);
    const HostTensor b = RandomTensor({k.m}, ++seed);
    ConvAttrs a;
    a.strides = k.strides;
    a.dilations = k.dils;
    a.pads = k.pads;
    const Shape xs = x.shape, ws = w.shape;
    const auto g =
        MakeConvGeometry("Conv", a, ShapeSpan(xs).subspan(2), ShapeSpan(ws).subspan(2), false);
    ASSERT_TRUE(g.ok()) << k.name;
    const std::vector<float> wf = w.Values<float>(), xf = x.Values<float>(), bf = b.Values<float>();
    const cpu::PackedMatrix packed = cpu::PackedMatrix::Pack(
        cpu::PackedMatrix::Side::kA, cpu::MatrixRef{wf.data(), k.c * k.kh * k.kw, false}, k.m,
        k.c * k.kh * k.kw);
    std::vector<float> scratch(cpu::DirectConvScratchFloats(*g, k.n, k.c, k.m),
                               std::numeric_limits<float>::quiet_NaN());
    std::vector<float> y(k.n * k.m * g->out_plane(), std::numeric_limits<float>::quiet_NaN());
    cpu::DirectConv(*g, packed, k.n, k.c, k.m, xf.data(), bf.data(), {}, scratch.data(),
                    y.data());
    const HostTensor want = NaiveConv2d(x, w, bf, k.strides, k.dils, k.pads, {});
    EXPECT_TRUE(AllClose(HostTensor::Of<float>(want.shape, y), want, kAtol, kRtol)) << k.name;
  }
}

// A stride past the direct path's phase bound takes the im2col path, with the same result.
TEST(DirectConvTest, HugeStridesTakeTheIm2ColPath) {
  const HostTensor x = RandomTensor({1, 3, 20, 20}, 7);
  const HostTensor w = RandomTensor({4, 3, 2, 2}, 8);
  const HostTensor b = RandomTensor({4}, 9);
  ConvAttrs a;
  a.strides = {9, 9};
  const Shape xs = x.shape, ws = w.shape;
  const auto g =
      MakeConvGeometry("Conv", a, ShapeSpan(xs).subspan(2), ShapeSpan(ws).subspan(2), false);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(cpu::DirectConvSuits(*g, 3));
  TensorView wv{const_cast<uint8_t*>(w.bytes.data()), w.dtype, w.shape, Device::Cpu()};
  const auto packed = cpu::PackNodeWeight(OpKind::kConv, a, wv);
  DeviceRunner runner(Device::Cpu());
  runner.set_packed_weight(packed.get());
  const auto got = runner.Run(OpKind::kConv, {x, w, b}, a, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(AllClose((*got)[0], NaiveConv2d(x, w, b.Values<float>(), {9, 9}, {1, 1},
                                              {0, 0, 0, 0}, {}),
                       kAtol, kRtol));
}

}  // namespace
}  // namespace ndserve::kernels::testing
