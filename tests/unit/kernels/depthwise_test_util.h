#ifndef NDSERVE_TESTS_UNIT_KERNELS_DEPTHWISE_TEST_UTIL_H_
#define NDSERVE_TESTS_UNIT_KERNELS_DEPTHWISE_TEST_UTIL_H_

// What the tests of the AVX-512 depthwise loops (the sixteen-channel one and the in-plane
// stride-2 one) share: a shape's geometry, one case against the naive reference, and the
// check that a fused activation gives the bits of the unfused conv followed by that
// activation as its node computes it.

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/conv_activation.h"
#include "kernels/conv_geometry.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"
#include "tests/unit/kernels/naive_depthwise.h"

namespace ndserve::kernels::testing {

// Every activation a depthwise loop fuses: in registers (Relu, Clip) or after (the others).
inline const ConvEpilogue kEveryActivation[] = {{ConvActivation::kNone},
                                                {ConvActivation::kRelu},
                                                {ConvActivation::kClip, -0.5f, 0.75f},
                                                {ConvActivation::kHardSwish},
                                                {ConvActivation::kSigmoid}};

// The loops run only on AVX-512 CPUs; elsewhere their tests are skipped.
class Avx512DepthwiseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::PackedGemmUsesAvx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  }
};

// A loop under test on x, w and bias (empty: none), with a fused activation.
using DepthwiseLoop = std::function<absl::StatusOr<std::vector<float>>(
    const DepthwiseShape&, const ConvEpilogue&, const std::vector<float>& x,
    const std::vector<float>& w, const std::vector<float>& bias)>;

inline ConvGeometry GeometryOf(const DepthwiseShape& k) {
  const int64_t xs[] = {k.h, k.w}, ks[] = {k.kh, k.kw};
  absl::StatusOr<ConvGeometry> g = MakeConvGeometry("Conv", AttrsOf(k), xs, ks, false);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : ConvGeometry{};
}

// The CPU Conv op on shape `k` with `act`, on random x, w and bias (seeds 51, 52, 53),
// as the graph would run it: what a test compares a loop's own outputs with.
struct CpuConvRun {
  HostTensor x, w, bias;
  absl::StatusOr<std::vector<HostTensor>> outputs;
};
inline CpuConvRun RunCpuConv(const DepthwiseShape& k, const ConvEpilogue& act) {
  CpuConvRun run{RandomTensor({k.n, k.c, k.h, k.w}, 51),
                 RandomTensor({k.c * k.mult, 1, k.kh, k.kw}, 52, -1.0f, 1.0f),
                 RandomTensor({k.c * k.mult}, 53), absl::UnknownError("not run")};
  DeviceRunner runner(Device::Cpu());
  run.outputs = runner.Run(OpKind::kConv, {run.x, run.w, run.bias}, AttrsOf(k, act), 1);
  return run;
}

// `loop` on random inputs of shape `k` (seeded by `seed`) against NaiveDepthwise; the
// products are summed in another order, so within atol 1e-5 and rtol 1e-4.
inline void ExpectMatchesNaive(const DepthwiseLoop& loop, const DepthwiseShape& k,
                               const ConvEpilogue& act, bool with_bias, uint32_t seed,
                               const std::string& name) {
  const int64_t m = k.c * k.mult;
  const std::vector<float> x = RandomFloats(k.n * k.c * k.h * k.w, seed);
  const std::vector<float> wt = RandomFloats(m * k.kh * k.kw, seed + 100, -1.0f, 1.0f);
  const std::vector<float> b = with_bias ? RandomFloats(m, seed + 200) : std::vector<float>{};
  const absl::StatusOr<std::vector<float>> got = loop(k, act, x, wt, b);
  ASSERT_TRUE(got.ok()) << name << ": " << got.status();
  const Shape shape = {k.n, m, k.out_h(), k.out_w()};
  EXPECT_TRUE(AllClose(HostTensor::Of<float>(shape, *got),
                       HostTensor::Of<float>(shape, NaiveDepthwise(k, act, x, wt, b)), 1e-5, 1e-4))
      << name;
}

// With Relu, Clip(0, 6), HardSwish and Sigmoid fused, `loop` gives exactly the bits of
// its unfused run followed by the activation (Sigmoid through the node's own loop: the
// functor alone, compiled here, may round otherwise); x holds a NaN, which must reach
// exactly `nans` outputs as NaN.
inline void ExpectFusedActivationsMatchUnfused(const DepthwiseLoop& loop, const DepthwiseShape& k,
                                               const std::vector<float>& x,
                                               const std::vector<float>& wt,
                                               const std::vector<float>& b, int nans) {
  const absl::StatusOr<std::vector<float>> plain = loop(k, {ConvActivation::kNone}, x, wt, b);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const ConvEpilogue acts[] = {{ConvActivation::kRelu},
                               {ConvActivation::kClip, 0.0f, 6.0f},
                               {ConvActivation::kHardSwish},
                               {ConvActivation::kSigmoid}};
  std::vector<float> sigmoid(plain->size());
  cpu::SigmoidArray(plain->data(), sigmoid.data(), static_cast<int64_t>(sigmoid.size()));
  for (const ConvEpilogue& act : acts) {
    const absl::StatusOr<std::vector<float>> fused = loop(k, act, x, wt, b);
    ASSERT_TRUE(fused.ok()) << fused.status();
    int seen = 0;
    for (std::size_t i = 0; i < plain->size(); ++i) {
      const float want = act.kind == ConvActivation::kSigmoid ? sigmoid[i] : act((*plain)[i]);
      if (std::isnan(want)) {
        ++seen;
        EXPECT_TRUE(std::isnan((*fused)[i])) << static_cast<int>(act.kind) << " at " << i;
        continue;
      }
      ASSERT_EQ((*fused)[i], want) << static_cast<int>(act.kind) << " at " << i;
    }
    EXPECT_EQ(seen, nans) << static_cast<int>(act.kind);
  }
}

}  // namespace ndserve::kernels::testing

#endif  // NDSERVE_TESTS_UNIT_KERNELS_DEPTHWISE_TEST_UTIL_H_
