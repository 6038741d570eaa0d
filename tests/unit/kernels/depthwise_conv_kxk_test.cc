// The CPU's 3x3 depthwise Conv at stride 1 and 2 (kernels/cpu/depthwise_conv3x3.cc: the
// row loop over a ring of padded lines, and the flat loop for planes under eight columns
// wide) against the naive double-precision reference, over planes 1x1, 2x3, 7x7, 13x17
// and 112x112, no, full and asymmetric padding, channel multipliers 1 and 2, every fused
// activation, with and without bias, batch 1 and 3. Also which path a geometry takes,
// read off its scratch: the 3x3 kernel never holds a padded copy of a plane, the general
// loop (dilation, uneven strides) does.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_depthwise.h"

namespace ndserve::kernels::testing {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // nine products, summed in another order

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
  ConvAttrs a;
  a.group = k.c;
  a.strides = k.strides;
  a.dilations = k.dilations;
  a.pads = k.pads;
  a.activation = act;
  DeviceRunner runner(Device::Cpu());
  std::vector<HostTensor> in = {x, w};
  if (bias) in.push_back(b);
  NDS_ASSIGN_OR_RETURN(std::vector<HostTensor> got, runner.Run(OpKind::kConv, in, a, 1));
  Outcome r;
  r.got = got[0];
  r.want = HostTensor::Of<float>(
      {k.n, m, k.out_h(), k.out_w()},
      NaiveDepthwise(k, act, x.Values<float>(), w.Values<float>(),
                     bias ? b.Values<float>() : std::vector<float>{}));
  r.scratch_peak = runner.scratch().peak_bytes();
  return r;
}

TEST(Depthwise3x3Test, MatchesNaiveOverShapesPadsActivationsAndBatches) {
  const ConvEpilogue acts[] = {{ConvActivation::kNone},
                               {ConvActivation::kRelu},
                               {ConvActivation::kClip, 0.0f, 6.0f},
                               {ConvActivation::kHardSwish},
                               {ConvActivation::kSigmoid}};
  const std::vector<std::pair<int64_t, int64_t>> planes = {
      {1, 1}, {2, 3}, {7, 7}, {13, 17}, {112, 112}};
  const std::vector<std::vector<int64_t>> pads = {
      {0, 0, 0, 0}, {1, 1, 1, 1}, {1, 0, 0, 1}, {0, 1, 2, 1}};
  int idx = 0, ran = 0;
  for (const auto& [h, w] : planes) {
    for (int64_t stride : {1, 2}) {
      for (const std::vector<int64_t>& p : pads) {
        // Cycle the other dimensions so every activation, multiplier, bias and batch
        // meets both strides and several planes.
        ++idx;
        DepthwiseShape k{idx % 4 < 2 ? 1 : 3, 3, 1 + idx % 2, h, w, 3, 3,
                         {stride, stride}, {1, 1}, p};
        // The padded plane must hold the window (else the Conv is invalid).
        if (h + p[0] + p[2] < 3 || w + p[1] + p[3] < 3) continue;
        const ConvEpilogue& act = acts[idx % 5];
        const bool bias = idx % 3 != 0;
        const std::string name = absl::StrCat(
            "plane ", h, "x", w, " stride ", stride, " pads ", absl::StrJoin(p, ","), " batch ",
            k.n, " mult ", k.mult, " act ", static_cast<int>(act.kind), bias ? " bias" : "");
        const absl::StatusOr<Outcome> r = RunCase(k, act, bias, 500 + 7 * idx);
        ASSERT_TRUE(r.ok()) << name << ": " << r.status();
        EXPECT_TRUE(AllClose(r->got, r->want, kAtol, kRtol)) << name;
        ++ran;
      }
    }
  }
  EXPECT_GE(ran, 30);
}

// Depthwise3x3Applies' geometries hold three padded lines per task (four tasks at most
// here: four planes), never a padded copy of a whole 112x112 plane; the others (dilated, or strides that differ per axis) still
// take the general loop, which copies the plane, and still match the reference.
TEST(Depthwise3x3Test, TakesThe3x3PathOnlyWhereItApplies) {
  const std::size_t padded_plane = 114 * 114 * sizeof(float);
  struct Geometry {
    std::string name;
    std::vector<int64_t> strides, dilations;
    bool three_by_three_path;
  };
  const std::vector<Geometry> geometries = {
      {"stride 1", {1, 1}, {1, 1}, true},
      {"stride 2", {2, 2}, {1, 1}, true},
      {"dilation 2", {1, 1}, {2, 2}, false},
      {"strides (1, 2)", {1, 2}, {1, 1}, false},
  };
  uint32_t seed = 900;
  for (const Geometry& ge : geometries) {
    const DepthwiseShape k{1, 4, 1, 112, 112, 3, 3, ge.strides, ge.dilations, {1, 1, 1, 1}};
    const absl::StatusOr<Outcome> r = RunCase(k, {ConvActivation::kRelu}, true, seed += 3);
    ASSERT_TRUE(r.ok()) << ge.name << ": " << r.status();
    EXPECT_TRUE(AllClose(r->got, r->want, kAtol, kRtol)) << ge.name;
    if (ge.three_by_three_path) {
      EXPECT_LT(r->scratch_peak, padded_plane) << ge.name;
    } else {
      EXPECT_GE(r->scratch_peak, padded_plane) << ge.name;
    }
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
