// The CPU Conv with W packed at load (kernels/cpu/packed_weights.h, KernelContext::
// packed_weight): PackedGemm in place of cblas_sgemm on the pointwise, im2col and folded-
// batch paths, with bias and each fused activation, against a naive double-precision
// reference; and proof that the kernel reads the packed operand rather than its W input.
#include <string>

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_conv.h"

namespace ndserve::kernels::testing {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // sums of products in another order

struct Case {
  std::string name;
  int64_t n, c, m, h, w, k, stride, pad;
  ConvEpilogue act;
};

std::unique_ptr<cpu::PackedMatrix> Pack(const HostTensor& w, const ConvAttrs& a) {
  TensorView view{const_cast<uint8_t*>(w.bytes.data()), w.dtype, w.shape, Device::Cpu()};
  return cpu::PackNodeWeight(OpKind::kConv, a, view);
}

TEST(ConvPackedWeightTest, EveryGemmPathMatchesNaive) {
  const std::vector<Case> cases = {
      {"pointwise", 2, 19, 13, 9, 11, 1, 1, 0, {ConvActivation::kRelu}},
      {"3x3 im2col", 2, 5, 7, 10, 9, 3, 1, 1, {ConvActivation::kClip, 0.0f, 6.0f}},
      {"7x7 stride 2 (a stem)", 1, 3, 17, 30, 30, 7, 2, 3, {ConvActivation::kNone}},
      {"many bands", 1, 64, 8, 70, 70, 3, 1, 1, {ConvActivation::kHardSwish}},
      // K = 288 > 2 * P = 2 * 16: the batch's col matrices side by side.
      {"folded batch", 3, 32, 20, 8, 8, 3, 2, 1, {ConvActivation::kSigmoid}},
  };
  uint32_t seed = 300;
  for (const Case& k : cases) {
    const HostTensor x = RandomTensor({k.n, k.c, k.h, k.w}, ++seed);
    const HostTensor w = RandomTensor({k.m, k.c, k.k, k.k}, ++seed, -0.2f, 0.2f);
    const HostTensor b = RandomTensor({k.m}, ++seed);
    ConvAttrs a;
    a.strides = {k.stride, k.stride};
    a.pads = {k.pad, k.pad, k.pad, k.pad};
    a.activation = k.act;
    const auto packed = Pack(w, a);
    ASSERT_NE(packed, nullptr) << k.name;
    DeviceRunner runner(Device::Cpu());
    runner.set_packed_weight(packed.get());
    const auto got = runner.Run(OpKind::kConv, {x, w, b}, a, 1);
    ASSERT_TRUE(got.ok()) << k.name << ": " << got.status();
    const HostTensor want = NaiveConv(x, w, b.Values<float>(), k.stride, k.pad, k.act);
    EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol)) << k.name;
  }
}

// Pointwise convs whose bias and activation the micro-kernel applies (HardSwish and
// Sigmoid after it),
// at mobilenet-like shapes off every tile edge: Cout and Cin not multiples of 6 or 16,
// planes of 1 (batches of 1 and 3), 7 x 7, 49 x 1 and 3137 = 3 x 1045 + 2 pixels; with
// and without a bias.
TEST(ConvPackedWeightTest, PointwiseBiasAndActivationMatchNaive) {
  struct Shape {
    int64_t n, c, m, h, w;
  };
  // The 1 x 1 planes are matrix-vector products (the batch's images as rows of one
  // product), which read W itself rather than its packed copy.
  const Shape shapes[] = {{1, 17, 25, 1, 1},   {3, 40, 144, 1, 1}, {2, 16, 96, 7, 7},
                          {1, 33, 13, 49, 1},  {1, 24, 11, 3137, 1}, {1, 320, 19, 7, 7},
                          {1, 5, 7, 3, 5}};
  const ConvEpilogue acts[] = {{ConvActivation::kNone},
                               {ConvActivation::kRelu},
                               {ConvActivation::kClip, 0.0f, 6.0f},
                               {ConvActivation::kHardSwish},
                               {ConvActivation::kSigmoid}};
  uint32_t seed = 500;
  for (const Shape& s : shapes) {
    for (const ConvEpilogue& act : acts) {
      for (bool with_bias : {true, false}) {
        const std::string name = absl::StrCat(s.n, "x", s.c, "x", s.h, "x", s.w, " -> ", s.m,
                                              " act ", static_cast<int>(act.kind),
                                              with_bias ? " bias" : "");
        const HostTensor x = RandomTensor({s.n, s.c, s.h, s.w}, ++seed, -3.0f, 3.0f);
        const HostTensor w = RandomTensor({s.m, s.c, 1, 1}, ++seed, -0.5f, 0.5f);
        const HostTensor b = RandomTensor({s.m}, ++seed, -2.0f, 2.0f);
        ConvAttrs a;
        a.activation = act;
        const auto packed = Pack(w, a);
        ASSERT_NE(packed, nullptr) << name;
        DeviceRunner runner(Device::Cpu());
        runner.set_packed_weight(packed.get());
        const auto got = with_bias ? runner.Run(OpKind::kConv, {x, w, b}, a, 1)
                                   : runner.Run(OpKind::kConv, {x, w}, a, 1);
        ASSERT_TRUE(got.ok()) << name << ": " << got.status();
        const std::vector<float> bias =
            with_bias ? b.Values<float>() : std::vector<float>(s.m, 0.0f);
        const HostTensor want = NaiveConv(x, w, bias, 1, 0, act);
        EXPECT_TRUE(AllClose((*got)[0], want, kAtol, kRtol)) << name;
      }
    }
  }
}

// Packed from 2 W, called with W: the result is the conv with 2 W, so the packed path
// ran; and a packed weight of other dims (another node's) is ignored.
TEST(ConvPackedWeightTest, ReadsThePackedOperandWhenItFits) {
  const HostTensor x = RandomTensor({1, 4, 6, 6}, 1);
  const HostTensor w = RandomTensor({5, 4, 3, 3}, 2);
  std::vector<float> w2 = w.Values<float>();
  for (float& v : w2) v *= 2.0f;
  const HostTensor w2t = HostTensor::Of<float>({5, 4, 3, 3}, w2);
  const std::vector<float> zero(5, 0.0f);
  ConvAttrs a;
  a.pads = {1, 1, 1, 1};
  const auto packed = Pack(w2t, a);
  DeviceRunner runner(Device::Cpu());
  runner.set_packed_weight(packed.get());
  auto got = runner.Run(OpKind::kConv, {x, w}, a, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(AllClose((*got)[0], NaiveConv(x, w2t, zero, 1, 1, {}), kAtol, kRtol));

  const auto other = Pack(RandomTensor({5, 4, 1, 1}, 3), a);
  runner.set_packed_weight(other.get());
  got = runner.Run(OpKind::kConv, {x, w}, a, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(AllClose((*got)[0], NaiveConv(x, w, zero, 1, 1, {}), kAtol, kRtol));
}

}  // namespace
}  // namespace ndserve::kernels::testing
