// The math family's operators (ops.def section "Elementwise math, comparison and logic;
// reductions; TopK, ArgMax") beyond what the numpy fixtures cover: attribute and host-
// input folding that the fixture format cannot express (Clip with only a max), error
// paths (bad shapes, types, attributes: INVALID_ARGUMENT or UNIMPLEMENTED naming the op),
// integer edge cases, and larger shapes against naive references, on every device present
// (on a GPU each result is also compared with the CPU kernel's).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/node_attrs.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

HostValue RealScalar(double v) {
  HostValue h;
  h.dtype = DType::kFp32;
  h.reals = {v};
  return h;
}

HostValue IntScalar(int64_t v) {
  HostValue h;
  h.dtype = DType::kInt64;
  h.ints = {v};
  return h;
}

absl::StatusCode InferCode(OpKind op, std::vector<TensorDesc> in, const OpAttrs& attrs) {
  return InferOutputs(op, in, attrs).status().code();
}

std::string InferMessage(OpKind op, std::vector<TensorDesc> in, const OpAttrs& attrs) {
  return std::string(InferOutputs(op, in, attrs).status().message());
}

class MathOpsTest : public ::testing::TestWithParam<Device> {
 protected:
  std::vector<HostTensor> Run(OpKind op, const std::vector<HostTensor>& inputs,
                              const OpAttrs& attrs, double atol, double rtol, int num_outputs = 1) {
    return RunAndCrossCheck(GetParam(), op, inputs, attrs, atol, rtol, num_outputs);
  }
};

// --- Unary and activations ---------------------------------------------------------------

TEST_P(MathOpsTest, UnaryMathMatchesLibm) {
  const HostTensor x = RandomTensor({3, 333}, 5, -8.0f, 8.0f);
  const std::vector<float> xv = x.Values<float>();
  struct Case {
    OpKind op;
    OpAttrs attrs;
    double (*fn)(double);
  };
  const Case cases[] = {
      {OpKind::kExp, NoAttrs{}, [](double v) { return std::exp(v); }},
      {OpKind::kNeg, NoAttrs{}, [](double v) { return -v; }},
      {OpKind::kAbs, NoAttrs{}, [](double v) { return std::fabs(v); }},
      {OpKind::kFloor, NoAttrs{}, [](double v) { return std::floor(v); }},
      {OpKind::kCeil, NoAttrs{}, [](double v) { return std::ceil(v); }},
      {OpKind::kReciprocal, NoAttrs{}, [](double v) { return 1.0 / v; }},
      {OpKind::kLeakyRelu, ActivationAttrs{0.25f, 0.0f},
       [](double v) { return v < 0 ? 0.25 * v : v; }},
      {OpKind::kElu, ActivationAttrs{1.0f, 0.0f},
       [](double v) { return v < 0 ? std::expm1(v) : v; }},
      {OpKind::kHardSigmoid, ActivationAttrs{0.25f, 0.5f},
       [](double v) { return std::clamp(0.25 * v + 0.5, 0.0, 1.0); }},
      {OpKind::kHardSwish, ActivationAttrs{1.0f / 6, 0.5f},
       [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); }},
      {OpKind::kClip, ClipAttrs{-1.0f, 3.0f}, [](double v) { return std::clamp(v, -1.0, 3.0); }},
  };
  for (const Case& c : cases) {
    std::vector<float> want(xv.size());
    for (std::size_t i = 0; i < xv.size(); ++i) want[i] = static_cast<float>(c.fn(xv[i]));
    const auto got = Run(c.op, {x}, c.attrs, 1e-6, 1e-5);
    ASSERT_EQ(got.size(), 1u) << OpKindName(c.op);
    EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(x.shape, want), 1e-6, 1e-5))
        << OpKindName(c.op);
  }
  const HostTensor pos = RandomTensor({1000}, 6, 0.001f, 100.0f);
  for (OpKind op : {OpKind::kSqrt, OpKind::kLog}) {
    std::vector<float> want;
    for (float v : pos.Values<float>()) {
      want.push_back(static_cast<float>(op == OpKind::kSqrt ? std::sqrt(v) : std::log(v)));
    }
    const auto got = Run(op, {pos}, NoAttrs{}, 1e-6, 1e-5);
    EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(pos.shape, want), 1e-6, 1e-5))
        << OpKindName(op);
  }
}

TEST_P(MathOpsTest, IntegerNegAndAbsWrapAtTheMinimum) {
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  const HostTensor a = HostTensor::Of<int64_t>({4}, {5, -7, 0, kMin64});
  EXPECT_THAT(Run(OpKind::kNeg, {a}, NoAttrs{}, 0, 0)[0].Values<int64_t>(),
              ElementsAre(-5, 7, 0, kMin64));
  EXPECT_THAT(Run(OpKind::kAbs, {a}, NoAttrs{}, 0, 0)[0].Values<int64_t>(),
              ElementsAre(5, 7, 0, kMin64));
  const HostTensor b = HostTensor::Of<int32_t>({3}, {-3, kMin32, 9});
  EXPECT_THAT(Run(OpKind::kAbs, {b}, NoAttrs{}, 0, 0)[0].Values<int32_t>(),
              ElementsAre(3, kMin32, 9));
}

TEST_P(MathOpsTest, ClipWithOnlyAMaxAndNaN) {
  // Clip(x, "", max): position 1 absent, position 2 present.
  auto attrs = BuildOpAttrs(OpKind::kClip, 13, {},
                            HostInputs({std::nullopt, std::nullopt, RealScalar(0.5)}));
  ASSERT_TRUE(attrs.ok()) << attrs.status();
  const ClipAttrs& c = std::get<ClipAttrs>(*attrs);
  EXPECT_EQ(c.min, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(c.max, 0.5f);
  const HostTensor x = HostTensor::Of<float>({5}, {-100.0f, 0.25f, 0.5f, 7.0f, NAN});
  const auto got = Run(OpKind::kClip, {x}, *attrs, 0, 0);
  EXPECT_TRUE(
      AllClose(got[0], HostTensor::Of<float>({5}, {-100.0f, 0.25f, 0.5f, 0.5f, NAN}), 0, 0));
}

TEST_P(MathOpsTest, PReluBroadcastsSlopeOverChannels) {
  const HostTensor x = RandomTensor({2, 5, 3, 7}, 8);
  const HostTensor slope = RandomTensor({5, 1, 1}, 9, 0.0f, 1.0f);
  const std::vector<float> xv = x.Values<float>(), sv = slope.Values<float>();
  std::vector<float> want(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const float s = sv[(i / 21) % 5];
    want[i] = xv[i] < 0 ? xv[i] * s : xv[i];
  }
  const auto got = Run(OpKind::kPRelu, {x, slope}, NoAttrs{}, 0, 0);
  EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(x.shape, want), 0, 0));
}

TEST(MathOpsErrors, UnaryAndActivationRules) {
  EXPECT_EQ(InferCode(OpKind::kSqrt, {{DType::kInt64, {2}}}, NoAttrs{}),
            absl::StatusCode::kUnimplemented);
  EXPECT_THAT(InferMessage(OpKind::kExp, {{DType::kInt32, {2}}}, NoAttrs{}), HasSubstr("Exp"));
  EXPECT_EQ(InferCode(OpKind::kNeg, {{DType::kBool, {2}}}, NoAttrs{}),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(InferCode(OpKind::kAbs, {{DType::kFp32, {2}}, {DType::kFp32, {2}}}, NoAttrs{}),
            absl::StatusCode::kInvalidArgument);
  // The activation attribute struct is required.
  EXPECT_EQ(InferCode(OpKind::kLeakyRelu, {{DType::kFp32, {2}}}, NoAttrs{}),
            absl::StatusCode::kInvalidArgument);
  // HardSwish exists from opset 14.
  EXPECT_EQ(BuildOpAttrs(OpKind::kHardSwish, 13, {}).status().code(),
            absl::StatusCode::kUnimplemented);
  auto leaky = BuildOpAttrs(OpKind::kLeakyRelu, 13, {});
  ASSERT_TRUE(leaky.ok());
  EXPECT_EQ(std::get<ActivationAttrs>(*leaky).alpha, 0.01f);
  auto hs = BuildOpAttrs(OpKind::kHardSigmoid, 13, {{"beta", 0.25f}});
  ASSERT_TRUE(hs.ok());
  EXPECT_EQ(std::get<ActivationAttrs>(*hs).alpha, 0.2f);
  EXPECT_EQ(std::get<ActivationAttrs>(*hs).beta, 0.25f);
  EXPECT_EQ(BuildOpAttrs(OpKind::kElu, 13, {{"alpha", std::string("x")}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MathOpsErrors, ClipAndPReluRules) {
  HostValue two;
  two.dtype = DType::kFp32;
  two.shape = {2};
  two.reals = {0.0, 1.0};
  auto bad = BuildOpAttrs(OpKind::kClip, 13, {}, HostInputs({std::nullopt, two}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), AllOf(HasSubstr("Clip"), HasSubstr("min")));
  EXPECT_EQ(BuildOpAttrs(OpKind::kClip, 13, {}, HostInputs({std::nullopt, RealScalar(NAN)}))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InferCode(OpKind::kClip, {{DType::kInt32, {2}}}, ClipAttrs{}),
            absl::StatusCode::kUnimplemented);
  // The slope must broadcast to X, not the other way round.
  const std::string msg =
      InferMessage(OpKind::kPRelu, {{DType::kFp32, {2, 3}}, {DType::kFp32, {4}}}, NoAttrs{});
  EXPECT_THAT(msg, AllOf(HasSubstr("PRelu"), HasSubstr("[4]"), HasSubstr("[2,3]")));
  EXPECT_EQ(InferCode(OpKind::kPRelu, {{DType::kFp32, {3}}, {DType::kFp32, {2, 3}}}, NoAttrs{}),
            absl::StatusCode::kInvalidArgument);
}

// --- Broadcasting binary, comparison, logic, Where ------------------------------------------

TEST_P(MathOpsTest, VariadicMaxOverFourBroadcastInputs) {
  const Shape out = {3, 4, 5};
  const std::vector<Shape> shapes = {{5}, {3, 1, 5}, {4, 1}, {3, 4, 5}};
  std::vector<HostTensor> in;
  for (std::size_t k = 0; k < shapes.size(); ++k) in.push_back(RandomTensor(shapes[k], 20 + k));
  std::vector<float> want(NumElements(out), -INFINITY), low(NumElements(out), INFINITY);
  for (const HostTensor& t : in) {
    const Shape str = BroadcastStrides(t.shape, out);
    const std::vector<float> v = t.Values<float>();
    for (int64_t i = 0; i < NumElements(out); ++i) {
      int64_t off = 0, rest = i;
      for (int d = 2; d >= 0; --d) {
        off += (rest % out[d]) * str[d];
        rest /= out[d];
      }
      want[i] = std::max(want[i], v[off]);
      low[i] = std::min(low[i], v[off]);
    }
  }
  EXPECT_TRUE(
      AllClose(Run(OpKind::kMax, in, NoAttrs{}, 0, 0)[0], HostTensor::Of<float>(out, want), 0, 0));
  EXPECT_TRUE(
      AllClose(Run(OpKind::kMin, in, NoAttrs{}, 0, 0)[0], HostTensor::Of<float>(out, low), 0, 0));
}

TEST_P(MathOpsTest, MinMaxPropagateNaN) {
  const HostTensor a = HostTensor::Of<float>({3}, {NAN, 1.0f, 2.0f});
  const HostTensor b = HostTensor::Of<float>({3}, {0.0f, NAN, 1.0f});
  EXPECT_TRUE(AllClose(Run(OpKind::kMax, {a, b}, NoAttrs{}, 0, 0)[0],
                       HostTensor::Of<float>({3}, {NAN, NAN, 2.0f}), 0, 0));
  EXPECT_TRUE(AllClose(Run(OpKind::kMin, {a, b}, NoAttrs{}, 0, 0)[0],
                       HostTensor::Of<float>({3}, {NAN, NAN, 1.0f}), 0, 0));
}

TEST_P(MathOpsTest, ComparisonsAndLogicTreatAnyNonzeroByteAsTrue) {
  const HostTensor a = HostTensor::Of<uint8_t>({4}, {0, 1, 2, 255}, DType::kBool);
  const HostTensor b = HostTensor::Of<uint8_t>({4}, {0, 7, 1, 0}, DType::kBool);
  EXPECT_THAT(Run(OpKind::kEqual, {a, b}, NoAttrs{}, 0, 0)[0].Values<uint8_t>(),
              ElementsAre(1, 1, 1, 0));
  EXPECT_THAT(Run(OpKind::kAnd, {a, b}, NoAttrs{}, 0, 0)[0].Values<uint8_t>(),
              ElementsAre(0, 1, 1, 0));
  EXPECT_THAT(Run(OpKind::kNot, {a}, NoAttrs{}, 0, 0)[0].Values<uint8_t>(),
              ElementsAre(1, 0, 0, 0));
  const HostTensor w =
      Run(OpKind::kWhere, {a, HostTensor::Of<int32_t>({1}, {7}), HostTensor::Of<int32_t>({}, {-1})},
          NoAttrs{}, 0, 0)[0];
  EXPECT_THAT(w.Values<int32_t>(), ElementsAre(-1, 7, 7, 7));
}

TEST_P(MathOpsTest, WhereBroadcastsThreeWaysOnLargerShapes) {
  const Shape sc = {4, 1, 6}, sx = {5, 1}, sy = {4, 5, 1};
  std::vector<uint8_t> cv(NumElements(sc));
  for (std::size_t i = 0; i < cv.size(); ++i) cv[i] = (i * 7) % 3 == 0;
  const HostTensor c = HostTensor::Of<uint8_t>(sc, cv, DType::kBool);
  const HostTensor x = RandomTensor(sx, 30), y = RandomTensor(sy, 31);
  const Shape out = {4, 5, 6};
  const Shape cs = BroadcastStrides(sc, out), xs = BroadcastStrides(sx, out),
              ys = BroadcastStrides(sy, out);
  const std::vector<float> xv = x.Values<float>(), yv = y.Values<float>();
  std::vector<float> want(NumElements(out));
  for (int64_t i = 0; i < NumElements(out); ++i) {
    const int64_t d0 = i / 30, d1 = (i / 6) % 5, d2 = i % 6;
    const int64_t oc = d0 * cs[0] + d1 * cs[1] + d2 * cs[2];
    const int64_t ox = d0 * xs[0] + d1 * xs[1] + d2 * xs[2];
    const int64_t oy = d0 * ys[0] + d1 * ys[1] + d2 * ys[2];
    want[i] = cv[oc] ? xv[ox] : yv[oy];
  }
  EXPECT_TRUE(AllClose(Run(OpKind::kWhere, {c, x, y}, NoAttrs{}, 0, 0)[0],
                       HostTensor::Of<float>(out, want), 0, 0));
}

TEST(MathOpsErrors, BroadcastingRules) {
  const std::string msg = InferMessage(
      OpKind::kMax, {{DType::kFp32, {2, 3}}, {DType::kFp32, {3}}, {DType::kFp32, {4}}}, NoAttrs{});
  EXPECT_THAT(msg, AllOf(HasSubstr("Max"), HasSubstr("[4]")));
  EXPECT_EQ(InferCode(OpKind::kMin, {}, NoAttrs{}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InferCode(OpKind::kMin, {{DType::kFp32, {2}}, {DType::kInt64, {2}}}, NoAttrs{}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InferCode(OpKind::kMax, {{DType::kBool, {2}}}, NoAttrs{}),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(InferCode(OpKind::kPow, {{DType::kInt64, {2}}, {DType::kFp32, {2}}}, NoAttrs{}),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(InferCode(OpKind::kLess, {{DType::kBool, {2}}, {DType::kBool, {2}}}, NoAttrs{}),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(InferCode(OpKind::kGreater, {{DType::kFp32, {2}}, {DType::kInt32, {2}}}, NoAttrs{}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InferCode(OpKind::kAnd, {{DType::kBool, {2}}, {DType::kInt32, {2}}}, NoAttrs{}),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(InferCode(OpKind::kNot, {{DType::kFp32, {2}}}, NoAttrs{}),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(InferCode(OpKind::kWhere,
                      {{DType::kFp32, {2}}, {DType::kFp32, {2}}, {DType::kFp32, {2}}}, NoAttrs{}),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(InferCode(OpKind::kWhere,
                      {{DType::kBool, {2}}, {DType::kFp32, {2}}, {DType::kInt32, {2}}}, NoAttrs{}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InferCode(OpKind::kWhere,
                      {{DType::kBool, {2}}, {DType::kBytes, {2}}, {DType::kBytes, {2}}}, NoAttrs{}),
            absl::StatusCode::kUnimplemented);
  EXPECT_THAT(
      InferMessage(OpKind::kWhere, {{DType::kBool, {3}}, {DType::kFp32, {2}}, {DType::kFp32, {2}}},
                   NoAttrs{}),
      HasSubstr("Where"));
}

// --- Reductions, ArgMax, TopK, CumSum, LogSoftmax ----------------------------------------

TEST_P(MathOpsTest, ReduceMaxMinOverAxisSubsets) {
  const Shape s = {3, 4, 5, 6};
  const HostTensor x = RandomTensor(s, 41);
  const std::vector<float> xv = x.Values<float>();
  const Shape strides = ContiguousStrides(s);
  for (const std::vector<int64_t>& axes :
       {std::vector<int64_t>{0, 2}, {1, 3}, {3}, {0}, {1, 2}, {0, 1, 2, 3}}) {
    for (bool is_max : {false, true}) {
      Shape out;
      for (int d = 0; d < 4; ++d) out.push_back(std::count(axes.begin(), axes.end(), d) ? 1 : s[d]);
      std::vector<float> want(NumElements(out), is_max ? -INFINITY : INFINITY);
      const Shape ostr = ContiguousStrides(out);
      for (int64_t i = 0; i < NumElements(s); ++i) {
        int64_t o = 0;
        for (int d = 0; d < 4; ++d) {
          if (!std::count(axes.begin(), axes.end(), d)) o += ((i / strides[d]) % s[d]) * ostr[d];
        }
        want[o] = is_max ? std::max(want[o], xv[i]) : std::min(want[o], xv[i]);
      }
      const auto got = Run(is_max ? OpKind::kReduceMax : OpKind::kReduceMin, {x},
                           ReduceAttrs{axes, true, false}, 0, 0);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(out, want), 0, 0))
          << (is_max ? "max" : "min") << " axes " << ShapeToString(axes);
    }
  }
}

TEST_P(MathOpsTest, ReduceMaxOfNothingIsTheIdentity) {
  const auto f = Run(OpKind::kReduceMax, {HostTensor::Of<float>({2, 0}, {})},
                     ReduceAttrs{{1}, false, false}, 0, 0);
  EXPECT_TRUE(AllClose(f[0], HostTensor::Of<float>({2}, {-INFINITY, -INFINITY}), 0, 0));
  const auto i = Run(OpKind::kReduceMin, {HostTensor::Of<int64_t>({0, 3}, {})},
                     ReduceAttrs{{0}, true, false}, 0, 0);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(i[0].Values<int64_t>(), ElementsAre(kMax, kMax, kMax));
}

TEST_P(MathOpsTest, TopKSelectsAndSortsWideRows) {
  // Many ties (values from a small set) and a non-last axis.
  const int64_t n = 1000, k = 37;
  std::vector<float> xv(3 * n * 2);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7919) % 101);
  const HostTensor x = HostTensor::Of<float>({3, n, 2}, xv);
  for (bool largest : {true, false}) {
    const auto got = Run(OpKind::kTopK, {x}, TopKAttrs{k, 1, largest, true}, 0, 0, 2);
    ASSERT_EQ(got.size(), 2u);
    std::vector<float> wv;
    std::vector<int64_t> wi;
    std::vector<float> vals(3 * k * 2);
    std::vector<int64_t> idx(3 * k * 2);
    for (int64_t o = 0; o < 3; ++o) {
      for (int64_t j = 0; j < 2; ++j) {
        std::vector<int64_t> order(n);
        for (int64_t i = 0; i < n; ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          const float va = xv[(o * n + a) * 2 + j], vb = xv[(o * n + b) * 2 + j];
          return largest ? va > vb : va < vb;
        });
        for (int64_t s = 0; s < k; ++s) {
          idx[(o * k + s) * 2 + j] = order[s];
          vals[(o * k + s) * 2 + j] = xv[(o * n + order[s]) * 2 + j];
        }
      }
    }
    EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>({3, k, 2}, vals), 0, 0)) << largest;
    EXPECT_TRUE(AllClose(got[1], HostTensor::Of<int64_t>({3, k, 2}, idx), 0, 0)) << largest;
  }
}

TEST_P(MathOpsTest, TopKAndArgMaxRankNaNHighest) {
  const HostTensor x = HostTensor::Of<float>({5}, {1.0f, NAN, 3.0f, NAN, -1.0f});
  const auto top = Run(OpKind::kTopK, {x}, TopKAttrs{3, 0, true, true}, 0, 0, 2);
  EXPECT_THAT(top[1].Values<int64_t>(), ElementsAre(1, 3, 2));
  const auto bottom = Run(OpKind::kTopK, {x}, TopKAttrs{2, 0, false, true}, 0, 0, 2);
  EXPECT_THAT(bottom[1].Values<int64_t>(), ElementsAre(4, 0));
  EXPECT_THAT(Run(OpKind::kArgMax, {x}, ArgMaxAttrs{0, false, false}, 0, 0)[0].Values<int64_t>(),
              ElementsAre(1));
  EXPECT_THAT(Run(OpKind::kArgMax, {x}, ArgMaxAttrs{0, false, true}, 0, 0)[0].Values<int64_t>(),
              ElementsAre(3));
}

TEST_P(MathOpsTest, CumSumLongAxesAndIntegerWrap) {
  const HostTensor x = RandomTensor({4, 300, 3}, 50);
  const std::vector<float> xv = x.Values<float>();
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      std::vector<float> want(xv.size());
      for (int o = 0; o < 4; ++o) {
        for (int j = 0; j < 3; ++j) {
          double acc = 0;
          for (int s = 0; s < 300; ++s) {
            const int i = reverse ? 299 - s : s;
            const double v = xv[(o * 300 + i) * 3 + j];
            if (!exclusive) acc += v;
            want[(o * 300 + i) * 3 + j] = static_cast<float>(acc);
            if (exclusive) acc += v;
          }
        }
      }
      const auto got = Run(OpKind::kCumSum, {x}, CumSumAttrs{-2, exclusive, reverse}, 1e-5, 1e-5);
      EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(x.shape, want), 1e-4, 1e-5))
          << "exclusive " << exclusive << " reverse " << reverse;
    }
  }
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  const auto wrap = Run(OpKind::kCumSum, {HostTensor::Of<int32_t>({3}, {kMax, 1, 1})},
                        CumSumAttrs{0, false, false}, 0, 0);
  EXPECT_THAT(wrap[0].Values<int32_t>(), ElementsAre(kMax, std::numeric_limits<int32_t>::min(),
                                                     std::numeric_limits<int32_t>::min() + 1));
}

TEST_P(MathOpsTest, LogSoftmaxWideRowsAndInnerAxes) {
  const HostTensor x = RandomTensor({3, 200, 70}, 60, -20.0f, 20.0f);
  const std::vector<float> xv = x.Values<float>();
  for (int64_t axis : {1, 2}) {
    const int64_t n = axis == 1 ? 200 : 70, inner = axis == 1 ? 70 : 1;
    const int64_t outer = axis == 1 ? 3 : 600;
    std::vector<float> want(xv.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < inner; ++j) {
        double mx = -INFINITY, sum = 0;
        for (int64_t i = 0; i < n; ++i) mx = std::max<double>(mx, xv[(o * n + i) * inner + j]);
        for (int64_t i = 0; i < n; ++i) sum += std::exp(xv[(o * n + i) * inner + j] - mx);
        for (int64_t i = 0; i < n; ++i) {
          want[(o * n + i) * inner + j] =
              static_cast<float>(xv[(o * n + i) * inner + j] - mx - std::log(sum));
        }
      }
    }
    const auto got = Run(OpKind::kLogSoftmax, {x}, SoftmaxAttrs{axis}, 1e-5, 1e-5);
    EXPECT_TRUE(AllClose(got[0], HostTensor::Of<float>(x.shape, want), 1e-5, 1e-5))
        << "axis " << axis;
  }
}

TEST(MathOpsErrors, ReductionAndAxisRules) {
  EXPECT_EQ(InferCode(OpKind::kReduceMax, {{DType::kBool, {2}}}, ReduceAttrs{}),
            absl::StatusCode::kUnimplemented);
  EXPECT_THAT(InferMessage(OpKind::kReduceMin, {{DType::kFp32, {2, 3}}}, ReduceAttrs{{2}}),
              HasSubstr("ReduceMin"));
  EXPECT_EQ(InferCode(OpKind::kReduceMax, {{DType::kFp32, {2, 3}}}, ReduceAttrs{{1, -1}}),
            absl::StatusCode::kInvalidArgument);
  // ArgMax: axis in range, a non-empty axis.
  EXPECT_EQ(InferCode(OpKind::kArgMax, {{DType::kFp32, {2, 3}}}, ArgMaxAttrs{2, true, false}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(InferMessage(OpKind::kArgMax, {{DType::kFp32, {2, 0}}}, ArgMaxAttrs{1, true, false}),
              AllOf(HasSubstr("ArgMax"), HasSubstr("[2,0]")));
  auto argmax = BuildOpAttrs(OpKind::kArgMax, 13, {{"select_last_index", int64_t{1}}});
  ASSERT_TRUE(argmax.ok());
  EXPECT_EQ(std::get<ArgMaxAttrs>(*argmax).axis, 0);
  EXPECT_TRUE(std::get<ArgMaxAttrs>(*argmax).select_last_index);
  // TopK: K is required, one element, 0 <= K <= dim.
  EXPECT_THAT(BuildOpAttrs(OpKind::kTopK, 13, {}).status().message(),
              AllOf(HasSubstr("TopK"), HasSubstr("K")));
  EXPECT_EQ(BuildOpAttrs(OpKind::kTopK, 13, {}, HostInputs({std::nullopt, IntScalar(-1)}))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      BuildOpAttrs(OpKind::kTopK, 13, {}, HostInputs({std::nullopt, HostValue::OfInts({1, 2})}))
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  auto topk = BuildOpAttrs(OpKind::kTopK, 13, {{"largest", int64_t{0}}},
                           HostInputs({std::nullopt, HostValue::OfInts({3})}));
  ASSERT_TRUE(topk.ok()) << topk.status();
  EXPECT_EQ(std::get<TopKAttrs>(*topk).k, 3);
  EXPECT_EQ(std::get<TopKAttrs>(*topk).axis, -1);
  EXPECT_FALSE(std::get<TopKAttrs>(*topk).largest);
  EXPECT_THAT(InferMessage(OpKind::kTopK, {{DType::kFp32, {2, 3}}}, TopKAttrs{4, -1, true, true}),
              AllOf(HasSubstr("TopK"), HasSubstr("[2,3]")));
  auto topk_out =
      InferOutputs(OpKind::kTopK, {{DType::kInt32, {2, 5, 3}}}, TopKAttrs{2, 1, true, true});
  ASSERT_TRUE(topk_out.ok());
  EXPECT_EQ((*topk_out)[0], (TensorDesc{DType::kInt32, {2, 2, 3}}));
  EXPECT_EQ((*topk_out)[1], (TensorDesc{DType::kInt64, {2, 2, 3}}));
  // CumSum: the axis input is required and must be in range.
  EXPECT_EQ(BuildOpAttrs(OpKind::kCumSum, 14, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto cumsum = BuildOpAttrs(OpKind::kCumSum, 14, {{"reverse", int64_t{1}}},
                             HostInputs({std::nullopt, IntScalar(-1)}));
  ASSERT_TRUE(cumsum.ok());
  EXPECT_EQ(std::get<CumSumAttrs>(*cumsum).axis, -1);
  EXPECT_TRUE(std::get<CumSumAttrs>(*cumsum).reverse);
  EXPECT_EQ(InferCode(OpKind::kCumSum, {{DType::kFp32, {}}}, CumSumAttrs{0, false, false}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InferCode(OpKind::kCumSum, {{DType::kBool, {2}}}, CumSumAttrs{0, false, false}),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(InferCode(OpKind::kLogSoftmax, {{DType::kFp32, {2, 3}}}, SoftmaxAttrs{-3}),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Devices, MathOpsTest, ::testing::ValuesIn(TestDevices()), DeviceTestName);

}  // namespace
}  // namespace ndserve::kernels::testing
