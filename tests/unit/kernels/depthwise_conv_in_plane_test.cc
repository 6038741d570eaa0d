// The in-plane 3x3 depthwise Conv at strides 1 and 2
// (kernels/cpu/depthwise_conv_in_plane.cc), called directly, against the naive
// double-precision reference: planes from 3x3 to 112x112 (rows narrower than one load of
// 32 floats, rows with interior blocks, odd widths and heights, so a last output row
// without a partner); every top and left padding it takes (0, 1, 2) with various bottom
// and right ones; 1, 3 and 19 channels; batch 1 and 2; every activation; with and
// without bias. Also: fused Relu, Clip, HardSwish and Sigmoid give exactly the bits of the
// unfused conv followed by the activation (a NaN included), the CPU Conv takes the loop
// exactly where DepthwiseInPlaneChosen says, and what it does not apply to is refused.
// Skipped on CPUs without AVX-512, where the loop never runs.
#include "kernels/cpu/depthwise_conv_in_plane.h"

#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/cpu/depthwise_conv_c16.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/depthwise_test_util.h"

namespace ndserve::kernels::testing {
namespace {

absl::StatusOr<std::vector<float>> RunInPlane(const DepthwiseShape& k, const ConvEpilogue& act,
                                              const std::vector<float>& x,
                                              const std::vector<float>& w,
                                              const std::vector<float>& bias) {
  std::vector<float> y(k.n * k.c * k.out_h() * k.out_w(), -7.0f);
  NDS_RETURN_IF_ERROR(cpu::DepthwiseInPlane(GeometryOf(k), k.n, k.c, x.data(), w.data(),
                                            bias.empty() ? nullptr : bias.data(), act, y.data()));
  return y;
}

DepthwiseShape Shape3x3(int64_t n, int64_t c, int64_t h, int64_t w, int64_t stride,
                        std::vector<int64_t> pads) {
  return DepthwiseShape{n, c, 1, h, w, 3, 3, {stride, stride}, {1, 1}, std::move(pads)};
}

class DepthwiseInPlaneTest : public Avx512DepthwiseTest {};

TEST_F(DepthwiseInPlaneTest, MatchesNaiveOverStridesPlanesPadsChannelsAndActivations) {
  const std::vector<std::pair<int64_t, int64_t>> planes = {
      {3, 3}, {5, 4}, {14, 14}, {13, 17}, {28, 28}, {29, 31}, {9, 66}, {56, 56}, {112, 112}};
  const std::vector<std::vector<int64_t>> pads = {{1, 1, 1, 1}, {0, 0, 0, 0}, {2, 2, 2, 2},
                                                  {0, 1, 2, 1}, {2, 0, 1, 2}, {1, 2, 0, 0}};
  int idx = 0, ran = 0;
  for (int64_t stride : {1, 2}) {
    for (const auto& [h, w] : planes) {
      for (const std::vector<int64_t>& p : pads) {
        for (int64_t c : {1, 3, 19}) {
          ++idx;
          const int64_t cc = h * w > 40 * 40 ? std::min<int64_t>(c, 3) : c;
          const DepthwiseShape k = Shape3x3(1 + idx % 2, cc, h, w, stride, p);
          if (k.out_h() < 1 || k.out_w() < 1) continue;
          const ConvEpilogue& act = kEveryActivation[idx % 5];
          const bool with_bias = idx % 3 != 0;
          const std::string name = absl::StrCat(
              "stride ", stride, " plane ", h, "x", w, " c ", cc, " pads ", absl::StrJoin(p, ","),
              " batch ", k.n, " act ", static_cast<int>(act.kind), with_bias ? " bias" : "");
          ExpectMatchesNaive(RunInPlane, k, act, with_bias, 100 + idx, name);
          ++ran;
        }
      }
    }
  }
  EXPECT_GE(ran, 300);
}

// Relu and Clip are vector max / min that pass a NaN through as ReluOp and ClipOp do;
// HardSwish and Sigmoid run as their nodes run them, after the sums.
TEST_F(DepthwiseInPlaneTest, FusedActivationsEqualTheUnfusedPairBitForBit) {
  struct Case {
    int64_t stride;
    int nans;  // outputs that read input (11, 21)
  };
  // Stride 1: output rows 10..12 and columns 20..22; stride 2: rows 5, 6 and columns 10, 11.
  for (const Case& cs : {Case{1, 9}, Case{2, 4}}) {
    const DepthwiseShape k = Shape3x3(1, 5, 40, 45, cs.stride, {1, 1, 1, 1});
    std::vector<float> x = RandomFloats(k.c * k.h * k.w, 41);
    x[2 * k.h * k.w + 11 * k.w + 21] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> wt = RandomFloats(k.c * 9, 42, -1.0f, 1.0f);
    const std::vector<float> b = RandomFloats(k.c, 43);
    ExpectFusedActivationsMatchUnfused(RunInPlane, k, x, wt, b, cs.nans);
  }
}

// The CPU Conv takes the loop where DepthwiseInPlaneChosen holds (its outputs are the
// loop's bits), and the sixteen-channel loop is not chosen there; rows of 14 floats stay
// with the sixteen-channel loop.
TEST_F(DepthwiseInPlaneTest, TheCpuConvTakesItWhereChosen) {
  struct Case {
    int64_t h, stride;
    bool in_plane;
  };
  for (const Case& cs :
       {Case{112, 2, true}, Case{56, 2, true}, Case{28, 2, true}, Case{14, 2, false},
        Case{112, 1, true}, Case{56, 1, true}, Case{28, 1, true}, Case{14, 1, false}}) {
    const DepthwiseShape k = Shape3x3(1, 24, cs.h, cs.h, cs.stride, {1, 1, 1, 1});
    const std::string name = absl::StrCat(cs.h, "x", cs.h, " stride ", cs.stride);
    const ConvEpilogue act{ConvActivation::kClip, 0.0f, 6.0f};
    const CpuConvRun conv = RunCpuConv(k, act);
    ASSERT_TRUE(conv.outputs.ok()) << name << ": " << conv.outputs.status();
    EXPECT_EQ(cpu::DepthwiseInPlaneChosen(GeometryOf(k), 1, act), cs.in_plane) << name;
    EXPECT_EQ(cpu::DepthwiseC16Chosen(GeometryOf(k), 1, act), !cs.in_plane) << name;
    if (!cs.in_plane) continue;
    const absl::StatusOr<std::vector<float>> direct = RunInPlane(
        k, act, conv.x.Values<float>(), conv.w.Values<float>(), conv.bias.Values<float>());
    ASSERT_TRUE(direct.ok()) << name << ": " << direct.status();
    EXPECT_EQ((*conv.outputs)[0].Values<float>(), *direct) << name;
  }
}

TEST_F(DepthwiseInPlaneTest, AppliesOnlyWhereItShould) {
  const ConvEpilogue none{ConvActivation::kNone};
  const DepthwiseShape k = Shape3x3(1, 16, 28, 28, 2, {1, 1, 1, 1});
  EXPECT_TRUE(cpu::DepthwiseInPlaneApplies(GeometryOf(k), 1, {ConvActivation::kSigmoid}));
  EXPECT_FALSE(cpu::DepthwiseInPlaneApplies(GeometryOf(k), 2, none));  // a channel multiplier
  DepthwiseShape other = k;
  other.strides = {3, 3};
  EXPECT_FALSE(cpu::DepthwiseInPlaneApplies(GeometryOf(other), 1, none));
  other = k;
  other.strides = {2, 1};
  EXPECT_FALSE(cpu::DepthwiseInPlaneApplies(GeometryOf(other), 1, none));
  other = k;
  other.kh = other.kw = 5;
  other.pads = {2, 2, 2, 2};
  EXPECT_FALSE(cpu::DepthwiseInPlaneApplies(GeometryOf(other), 1, none));
  other = k;
  other.dilations = {2, 2};
  other.pads = {2, 2, 2, 2};
  EXPECT_FALSE(cpu::DepthwiseInPlaneApplies(GeometryOf(other), 1, none));
  other = k;
  other.pads = {3, 1, 1, 1};
  EXPECT_FALSE(cpu::DepthwiseInPlaneApplies(GeometryOf(other), 1, none));
  const std::vector<float> x(16 * 28 * 28, 1.0f), wt(16 * 9, 1.0f);
  EXPECT_EQ(RunInPlane(other, none, x, wt, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ndserve::kernels::testing
