// The sixteen-channel depthwise Conv (kernels/cpu/depthwise_conv_c16.cc), called directly,
// against the naive double-precision reference: channel counts that fill no, one and
// several blocks of sixteen and end in a partial one (1, 16, 19, 40); planes from 1x1 to
// 112x112 (the 56x56 and 112x112 ones cut into bands of rows, whose edges share input
// rows); 3x3 and 5x5; strides 1 and 2; no, full and asymmetric padding; every activation
// it takes; with and without bias; batch 1 and 2. Also: fused Relu, Clip, HardSwish and
// Sigmoid give exactly the bits of the unfused conv followed by the activation (a NaN
// included), a channel multiplier or a dilation is refused, and a full scratch is
// RESOURCE_EXHAUSTED.
// Skipped on CPUs without AVX-512, where the loop never runs.
#include "kernels/cpu/depthwise_conv_c16.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/depthwise_test_util.h"

namespace ndserve::kernels::testing {
namespace {

// DepthwiseC16 on x, w, bias (empty: none) with its own scratch.
absl::StatusOr<std::vector<float>> RunC16(const DepthwiseShape& k, const ConvEpilogue& act,
                                          const std::vector<float>& x, const std::vector<float>& w,
                                          const std::vector<float>& bias,
                                          std::size_t scratch_limit = SIZE_MAX) {
  DeviceRunner runner(Device::Cpu());
  runner.scratch().set_limit(scratch_limit);
  const KernelContext ctx = runner.context();
  std::vector<float> y(k.n * k.c * k.out_h() * k.out_w(), -7.0f);
  NDS_RETURN_IF_ERROR(cpu::DepthwiseC16(ctx, GeometryOf(k), k.n, k.c, x.data(), w.data(),
                                        bias.empty() ? nullptr : bias.data(), act, y.data()));
  return y;
}

absl::StatusOr<std::vector<float>> RunLoop(const DepthwiseShape& k, const ConvEpilogue& act,
                                           const std::vector<float>& x, const std::vector<float>& w,
                                           const std::vector<float>& bias) {
  return RunC16(k, act, x, w, bias);
}

class DepthwiseC16Test : public Avx512DepthwiseTest {};

TEST_F(DepthwiseC16Test, MatchesNaiveOverChannelsPlanesWindowsStridesPadsAndActivations) {
  const std::vector<std::pair<int64_t, int64_t>> planes = {{1, 1},   {3, 5},   {7, 7},    {14, 14},
                                                           {13, 17}, {56, 56}, {112, 112}};
  const std::vector<std::vector<int64_t>> pads = {
      {1, 1, 1, 1}, {0, 0, 0, 0}, {2, 2, 2, 2}, {0, 1, 2, 1}, {2, 0, 1, 2}};
  int idx = 0, ran = 0;
  for (int64_t kk : {3, 5}) {
    for (const auto& [h, w] : planes) {
      for (int64_t stride : {1, 2}) {
        for (int64_t c : {1, 16, 19, 40}) {
          ++idx;
          const std::vector<int64_t>& p = pads[idx % pads.size()];
          if (h + p[0] + p[2] < kk || w + p[1] + p[3] < kk) continue;
          // The big planes with fewer channels: they are there for their bands.
          const int64_t cc = h * w > 40 * 40 ? std::min<int64_t>(c, 19) : c;
          const DepthwiseShape k{1 + idx % 2, cc, 1, h, w, kk, kk, {stride, stride}, {1, 1}, p};
          const ConvEpilogue& act = kEveryActivation[idx % 5];
          const bool with_bias = idx % 3 != 0;
          const std::string name =
              absl::StrCat(kk, "x", kk, " plane ", h, "x", w, " stride ", stride, " c ", cc,
                           " pads ", absl::StrJoin(p, ","), " batch ", k.n, " act ",
                           static_cast<int>(act.kind), with_bias ? " bias" : "");
          ExpectMatchesNaive(RunLoop, k, act, with_bias, 100 + idx, name);
          ++ran;
        }
      }
    }
  }
  EXPECT_GE(ran, 100);
}

// The fused activations are the unfused ones' bits: Relu and Clip as vector max / min with
// NaN passed through as ReluOp and ClipOp pass it, HardSwish and Sigmoid as their nodes
// compute them.
TEST_F(DepthwiseC16Test, FusedActivationsEqualTheUnfusedPairBitForBit) {
  const DepthwiseShape k{1, 21, 1, 14, 14, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  std::vector<float> x = RandomFloats(k.c * k.h * k.w, 41);
  x[5 * k.h * k.w + 3 * k.w + 4] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> wt = RandomFloats(k.c * 9, 42, -1.0f, 1.0f);
  const std::vector<float> b = RandomFloats(k.c, 43);
  ExpectFusedActivationsMatchUnfused(RunLoop, k, x, wt, b, 9);  // the NaN's 3x3 neighbourhood
}

// The CPU Conv takes this loop where it applies: its outputs are DepthwiseC16's to the bit
// (the other loops sum the taps in another order, so their bits differ); 3x3 windows on
// rows of 28 floats or more take the in-plane loop (depthwise_conv_in_plane.h).
TEST_F(DepthwiseC16Test, TheCpuConvTakesItWhereItApplies) {
  struct Case {
    int64_t h, stride;
    bool c16;
  };
  for (const Case& cs : {Case{14, 1, true}, Case{14, 2, true}, Case{56, 2, false},
                         Case{112, 1, false}, Case{112, 2, false}}) {
    const DepthwiseShape k{1,      24,          1, cs.h, cs.h, 3, 3, {cs.stride, cs.stride},
                           {1, 1}, {1, 1, 1, 1}};
    const std::string name = absl::StrCat(cs.h, "x", cs.h, " stride ", cs.stride);
    const ConvEpilogue act{ConvActivation::kRelu};
    const CpuConvRun conv = RunCpuConv(k, act);
    ASSERT_TRUE(conv.outputs.ok()) << name << ": " << conv.outputs.status();
    const absl::StatusOr<std::vector<float>> c16 = RunC16(
        k, act, conv.x.Values<float>(), conv.w.Values<float>(), conv.bias.Values<float>());
    ASSERT_TRUE(c16.ok()) << name << ": " << c16.status();
    EXPECT_EQ((*conv.outputs)[0].Values<float>() == *c16, cs.c16) << name;
    EXPECT_EQ(cpu::DepthwiseC16Chosen(GeometryOf(k), 1, act), cs.c16) << name;
    EXPECT_TRUE(cpu::DepthwiseC16Applies(GeometryOf(k), 1, act)) << name;
  }
}

TEST_F(DepthwiseC16Test, AppliesOnlyWhereItShould) {
  const DepthwiseShape k{1, 16, 1, 14, 14, 3, 3, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  const ConvGeometry g = GeometryOf(k);
  EXPECT_TRUE(cpu::DepthwiseC16Applies(g, 1, {ConvActivation::kClip, 0.0f, 6.0f}));
  EXPECT_FALSE(cpu::DepthwiseC16Applies(g, 2, {ConvActivation::kNone}));
  EXPECT_TRUE(cpu::DepthwiseC16Applies(g, 1, {ConvActivation::kSigmoid}));
  DepthwiseShape dilated = k;
  dilated.dilations = {2, 2};
  dilated.pads = {2, 2, 2, 2};
  EXPECT_FALSE(cpu::DepthwiseC16Applies(GeometryOf(dilated), 1, {ConvActivation::kNone}));
  const std::vector<float> x(16 * 14 * 14, 1.0f), wt(16 * 9, 1.0f);
  const absl::StatusOr<std::vector<float>> refused =
      RunC16(dilated, {ConvActivation::kNone}, x, wt, {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  const absl::StatusOr<std::vector<float>> full =
      RunC16(k, {ConvActivation::kNone}, x, wt, {}, 1024);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
}

}  // namespace
}  // namespace ndserve::kernels::testing
