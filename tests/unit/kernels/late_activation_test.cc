// A Conv with a fused Sigmoid gives exactly the bits of the Conv followed by the Sigmoid
// node, one with a fused SiLU those of the Conv, Sigmoid and Mul nodes, and one with a
// fused HardSwish those of the Conv and the HardSwish node, on every CPU conv path (batch
// 2 where tiles cross images): the Winograd conv, the direct conv, the 1x1 GEMM, im2col,
// the depthwise row loop (channel multiplier 2) and the sixteen-channel depthwise loop.
// The host Sigmoid is a polynomial (kernels/elementwise_ops.h) and HardSwish a multiply-add
// that an FMA clone contracts, so each path calls the nodes' own loops
// (kernels/cpu/late_activation.h); this test fails if one of them applies the functor
// inside its own ISA clones instead. Also the node
// over several ParallelFor chunks against that loop over the whole tensor, and its
// accuracy.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/elementwise_ops.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

struct Case {
  std::string name;
  int64_t n, c, m, h, k, stride, group;
  bool packed;  // with the weight packed at load, as the engine hands it (Winograd, direct)
};

TEST(LateActivationTest, EveryCpuConvPathEqualsTheActivationNodesBitForBit) {
  const std::vector<Case> cases = {
      {"winograd 3x3", 2, 40, 33, 14, 3, 1, 1, true},
      {"direct 3x3 stride 2", 2, 8, 24, 15, 3, 2, 1, true},
      {"1x1 gemm", 1, 32, 40, 9, 1, 1, 1, true},
      {"im2col 5x5", 1, 3, 6, 11, 5, 1, 1, false},
      {"depthwise rows, multiplier 2", 1, 12, 24, 28, 3, 1, 12, false},
      {"depthwise, one output per channel", 1, 40, 40, 14, 3, 1, 40, false},
      {"depthwise 5x5 stride 2", 1, 24, 24, 28, 5, 2, 24, false},
  };
  uint32_t seed = 8100;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const HostTensor x = RandomTensor({k.n, k.c, k.h, k.h}, seed += 3, -3.0f, 3.0f);
    const HostTensor w = RandomTensor({k.m, k.c / k.group, k.k, k.k}, seed + 1, -0.5f, 0.5f);
    const HostTensor b = RandomTensor({k.m}, seed + 2);
    ConvAttrs a;
    a.group = k.group;
    a.strides = {k.stride, k.stride};
    a.pads = {k.k / 2, k.k / 2, k.k / 2, k.k / 2};
    DeviceRunner runner(Device::Cpu());
    TensorView wv{const_cast<uint8_t*>(w.bytes.data()), w.dtype, w.shape, Device::Cpu()};
    const auto packed = k.packed ? cpu::PackNodeWeight(OpKind::kConv, a, wv) : nullptr;
    if (k.packed) ASSERT_NE(packed, nullptr);
    runner.set_packed_weight(packed.get());
    const auto plain = runner.Run(OpKind::kConv, {x, w, b}, a, 1);
    ASSERT_TRUE(plain.ok()) << plain.status();
    // The conv with `kind` fused against the nodes' result `want`, to the bit.
    const auto expect_fused_equals = [&](ConvActivation kind, const HostTensor& want,
                                         const char* name) {
      a.activation = {kind};
      const auto fused = runner.Run(OpKind::kConv, {x, w, b}, a, 1);
      ASSERT_TRUE(fused.ok()) << name << ": " << fused.status();
      const std::vector<float> got = (*fused)[0].Values<float>(), v = want.Values<float>();
      ASSERT_EQ(got.size(), v.size()) << name;
      for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], v[i]) << name << " at " << i;
    };
    const auto node = runner.Run(OpKind::kSigmoid, {(*plain)[0]}, NoAttrs{}, 1);
    ASSERT_TRUE(node.ok()) << node.status();
    expect_fused_equals(ConvActivation::kSigmoid, (*node)[0], "Sigmoid");
    // SiLU: the Mul node of the conv's output and the Sigmoid node's.
    const auto mul = runner.Run(OpKind::kMul, {(*plain)[0], (*node)[0]}, NoAttrs{}, 1);
    ASSERT_TRUE(mul.ok()) << mul.status();
    expect_fused_equals(ConvActivation::kSilu, (*mul)[0], "SiLU");
    // HardSwish: the HardSwish node, whose multiply-add an FMA clone would contract.
    const auto hswish =
        runner.Run(OpKind::kHardSwish, {(*plain)[0]}, ActivationAttrs{1.0f / 6.0f, 0.5f}, 1);
    ASSERT_TRUE(hswish.ok()) << hswish.status();
    expect_fused_equals(ConvActivation::kHardSwish, (*hswish)[0], "HardSwish");
  }
}

TEST(LateActivationTest, TheSigmoidNodeOverSeveralChunksIsOneLoopOverTheWholeTensor) {
  const HostTensor x = RandomTensor({3, 300000}, 8200, -40.0f, 40.0f);
  DeviceRunner runner(Device::Cpu());
  const auto y = runner.Run(OpKind::kSigmoid, {x}, NoAttrs{}, 1);
  ASSERT_TRUE(y.ok()) << y.status();
  const std::vector<float> xv = x.Values<float>(), yv = (*y)[0].Values<float>();
  std::vector<float> want(xv.size());
  cpu::SigmoidArray(xv.data(), want.data(), static_cast<int64_t>(xv.size()));
  ASSERT_EQ(yv.size(), xv.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    ASSERT_EQ(yv[i], want[i]) << "at " << i;
    const double exact = 1.0 / (1.0 + std::exp(-static_cast<double>(xv[i])));
    worst = std::max(worst, std::abs(yv[i] - exact) / std::max(exact, 1e-30));
  }
  EXPECT_LT(worst, 1e-6);  // relative: a few ulp
}

// HardSigmoid's alpha * x + beta rounded twice, as the ONNX reference computes it in float:
// `volatile` keeps this test's own compiler from fusing the pair.
float TwoRoundingHardSigmoid(float x, float alpha, float beta) {
  volatile float product = alpha * x;
  const float v = product + beta;
  return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
}

// The nodes' loops run in this CPU's widest clone (AVX-512 here); with a contracted
// multiply-add one value in a few would differ in its last bit. Every length up to 70
// covers the vector bodies and their tails; NaN, infinities and the kinks at -3 and 3 are in.
TEST(LateActivationTest, HardSwishAndHardSigmoidLoopsRoundTheMultiplyAddTwice) {
  const HostTensor r = RandomTensor({4096}, 8300, -4.0f, 4.0f);
  std::vector<float> x = r.Values<float>();
  const float specials[] = {std::nanf(""), INFINITY, -INFINITY, -3.0f, 3.0f, -0.0f, 0.0f,
                            2.9999998f, -2.9999998f, 1e-30f, -1e30f};
  std::copy(std::begin(specials), std::end(specials), x.begin() + 5);
  const float alpha = 0.2f, beta = 0.5f;  // HardSigmoid's defaults
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{33}, int64_t{70},
                    static_cast<int64_t>(x.size())}) {
    std::vector<float> swish(n), hsig(n);
    cpu::HardSwishArray(x.data(), swish.data(), n);
    cpu::HardSigmoidArray(x.data(), hsig.data(), n, alpha, beta);
    for (int64_t i = 0; i < n; ++i) {
      const float want_sig = TwoRoundingHardSigmoid(x[i], alpha, beta);
      const float want_swish = x[i] * TwoRoundingHardSigmoid(x[i], 1.0f / 6.0f, 0.5f);
      if (std::isnan(want_swish)) {
        EXPECT_TRUE(std::isnan(swish[i])) << "HardSwish at " << i;
      } else {
        EXPECT_EQ(swish[i], want_swish) << "HardSwish(" << x[i] << ") at " << i;
      }
      if (std::isnan(want_sig)) {
        EXPECT_TRUE(std::isnan(hsig[i])) << "HardSigmoid at " << i;
      } else {
        EXPECT_EQ(hsig[i], want_sig) << "HardSigmoid(" << x[i] << ") at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
