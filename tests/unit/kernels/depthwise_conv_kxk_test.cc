// The CPU's 3x3 and 5x5 depthwise Conv at stride 1 and 2 (kernels/cpu/depthwise_conv_kxk.cc:
// the row loop over a ring of padded lines, and the flat loop for planes under eight
// columns wide) against the naive double-precision reference: 3x3 over planes 1x1, 2x3,
// 7x7, 13x17 and 112x112, 5x5 over planes 5x5, 7x7, 6x10, 13x17, 14x14, 28x28 and 112x112
// (even and odd sizes, widths off a multiple of 8, both loops), no, full and asymmetric
// padding, channel multipliers 1 and 2, every fused activation, with and without bias,
// batch 1 and 3. Also which path a geometry takes, read off its scratch: the KxK kernel
// never holds a padded copy of a plane, the general loop (dilation, uneven strides, 7x7)
// does.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_depthwise.h"

namespace ndserve::kernels::testing {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // 9 or 25 products, summed in another order

struct Outcome {
  HostTensor got, want;
  std::size_t scratch_peak = 0;
};

// Runs the CPU Conv on random data of shape k and the reference beside it.
absl::StatusOr<Outcome> RunCase(const DepthwiseShape& k, const ConvEpilogue& act, bool bias,
                            uint32_t seed) {
  const int64_t m = k.c * k.mult;
  const HostTensor x = RandomTensor({k.n, k.c, k.h, k.w}, seed);
  const HostTensor w = RandomTensor({m, 1, k.kh, k.kw}, seed + 1, -1.0f, 1.0f);
  const HostTensor b = RandomTensor({m}, seed + 2);
  DeviceRunner runner(Device::Cpu());
  std::vector<HostTensor> in = {x, w};
  if (bias) in.push_back(b);
  NDS_ASSIGN_OR_RETURN(std::vector<HostTensor> got,
                       runner.Run(OpKind::kConv, in, AttrsOf(k, act), 1));
  Outcome r;
  r.got = got[0];
  r.want = HostTensor::Of<float>(
      {k.n, m, k.out_h(), k.out_w()},
      NaiveDepthwise(k, act, x.Values<float>(), w.Values<float>(),
                     bias ? b.Values<float>() : std::vector<float>{}));
  r.scratch_peak = runner.scratch().peak_bytes();
  return r;
}

// Every plane at both strides and every padding with a kk x kk window, cycling the other
// dimensions so every activation, multiplier, bias and batch meets both strides and
// several planes; returns how many cases ran.
int Sweep(int64_t kk, const std::vector<std::pair<int64_t, int64_t>>& planes,
          const std::vector<std::vector<int64_t>>& pads, uint32_t seed0) {
  const ConvEpilogue acts[] = {{ConvActivation::kNone},
                               {ConvActivation::kRelu},
                               {ConvActivation::kClip, 0.0f, 6.0f},
                               {ConvActivation::kHardSwish},
                               {ConvActivation::kSigmoid}};
  int idx = 0, ran = 0;
  for (const auto& [h, w] : planes) {
    for (int64_t stride : {1, 2}) {
      for (const std::vector<int64_t>& p : pads) {
        ++idx;
        DepthwiseShape k{idx % 4 < 2 ? 1 : 3, 3, 1 + idx % 2, h, w, kk, kk,
                         {stride, stride}, {1, 1}, p};
        // The padded plane must hold the window (else the Conv is invalid).
        if (h + p[0] + p[2] < kk || w + p[1] + p[3] < kk) continue;
        const ConvEpilogue& act = acts[idx % 5];
        const bool bias = idx % 3 != 0;
        const std::string name = absl::StrCat(
            kk, "x", kk, " plane ", h, "x", w, " stride ", stride, " pads ",
            absl::StrJoin(p, ","), " batch ", k.n, " mult ", k.mult, " act ",
            static_cast<int>(act.kind), bias ? " bias" : "");
        const absl::StatusOr<Outcome> r = RunCase(k, act, bias, seed0 + 7 * idx);
        EXPECT_TRUE(r.ok()) << name << ": " << r.status();
        if (!r.ok()) continue;
        EXPECT_TRUE(AllClose(r->got, r->want, kAtol, kRtol)) << name;
        ++ran;
      }
    }
  }
  return ran;
}

TEST(DepthwiseKxKTest, MatchesNaiveOverShapesPadsActivationsAndBatches3x3) {
  EXPECT_GE(Sweep(3, {{1, 1}, {2, 3}, {7, 7}, {13, 17}, {112, 112}},
                  {{0, 0, 0, 0}, {1, 1, 1, 1}, {1, 0, 0, 1}, {0, 1, 2, 1}}, 500),
            30);
}

TEST(DepthwiseKxKTest, MatchesNaiveOverShapesPadsActivationsAndBatches5x5) {
  EXPECT_GE(Sweep(5, {{5, 5}, {7, 7}, {6, 10}, {13, 17}, {14, 14}, {28, 28}, {112, 112}},
                  {{2, 2, 2, 2}, {0, 0, 0, 0}, {2, 1, 0, 2}, {1, 2, 3, 0}}, 700),
            50);
}

// DepthwiseKxKApplies' geometries hold K + 2 x stride padded lines per task (four tasks at most here:
// four planes), never a padded copy of a whole 112x112 plane; the others (dilated, strides
// that differ per axis, a 7x7 window) still take the general loop, which copies the plane,
// and still match the reference.
TEST(DepthwiseKxKTest, TakesTheKxKPathOnlyWhereItApplies) {
  struct Geometry {
    std::string name;
    int64_t kk;
    std::vector<int64_t> strides, dilations;
    bool kxk_path;
  };
  const std::vector<Geometry> geometries = {
      {"3x3 stride 1", 3, {1, 1}, {1, 1}, true},
      {"3x3 stride 2", 3, {2, 2}, {1, 1}, true},
      {"3x3 dilation 2", 3, {1, 1}, {2, 2}, false},
      {"3x3 strides (1, 2)", 3, {1, 2}, {1, 1}, false},
      {"5x5 stride 1", 5, {1, 1}, {1, 1}, true},
      {"5x5 stride 2", 5, {2, 2}, {1, 1}, true},
      {"5x5 dilation 2", 5, {1, 1}, {2, 2}, false},
      {"5x5 strides (1, 2)", 5, {1, 2}, {1, 1}, false},
      {"7x7 stride 1", 7, {1, 1}, {1, 1}, false},
  };
  uint32_t seed = 900;
  for (const Geometry& ge : geometries) {
    const int64_t pad = ge.kk / 2;
    // The general loop's phases hold at least the image and its padding.
    const std::size_t padded_plane = (112 + 2 * pad) * (112 + 2 * pad) * sizeof(float);
    // Channel multiplier 2: with one output per channel an AVX-512 CPU takes the
    // sixteen-channel loop instead (depthwise_conv_c16_test.cc).
    const DepthwiseShape k{1, 4, 2, 112, 112, ge.kk, ge.kk, ge.strides, ge.dilations,
                           {pad, pad, pad, pad}};
    const absl::StatusOr<Outcome> r = RunCase(k, {ConvActivation::kRelu}, true, seed += 3);
    ASSERT_TRUE(r.ok()) << ge.name << ": " << r.status();
    EXPECT_TRUE(AllClose(r->got, r->want, kAtol, kRtol)) << ge.name;
    if (ge.kxk_path) {
      EXPECT_LT(r->scratch_peak, padded_plane) << ge.name;
    } else {
      EXPECT_GE(r->scratch_peak, padded_plane) << ge.name;
    }
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
