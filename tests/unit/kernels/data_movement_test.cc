// The data-movement family (Slice, Expand, ConstantOfShape, Range, Tile, Split, Pad,
// Trilu): bad attributes and host inputs are INVALID_ARGUMENT or UNIMPLEMENTED naming the
// op, and the kernels agree with naive references on every device present, over dtypes
// the numpy fixtures do not reach (on a GPU, also bit for bit with the CPU kernel).
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data_plans.h"
#include "kernels/node_attrs.h"
#include "kernels/shape_inference.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

HostValue Ints(std::vector<int64_t> v) { return HostValue::OfInts(std::move(v)); }
HostValue Scalar(DType dtype, double v) {
  HostValue h;
  h.dtype = dtype;
  if (h.IsReal()) {
    h.reals = {v};
  } else {
    h.ints = {static_cast<int64_t>(v)};
  }
  return h;
}

absl::StatusOr<OpAttrs> Build(OpKind op, std::vector<std::optional<HostValue>> host,
                              AttrMap attrs = {}, int opset = 17) {
  return BuildOpAttrs(op, opset, attrs, HostInputs(std::move(host)));
}

absl::Status InferError(OpKind op, std::vector<TensorDesc> in, const OpAttrs& attrs) {
  return InferOutputs(op, in, attrs).status();
}

TensorDesc F32(Shape s) { return {DType::kFp32, std::move(s)}; }

void ExpectError(const absl::Status& s, absl::StatusCode code, absl::string_view op,
                 absl::string_view detail) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr(std::string(op)), HasSubstr(std::string(detail))));
}

TEST(DataRules, BuildErrorsNameTheOp) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto kUnimplemented = absl::StatusCode::kUnimplemented;
  ExpectError(Build(OpKind::kSlice, {std::nullopt, Ints({0})}).status(), kInvalid, "Slice", "ends");
  ExpectError(Build(OpKind::kSlice, {std::nullopt, Scalar(DType::kFp32, 1), Ints({1})}).status(),
              kInvalid, "Slice", "integer");
  ExpectError(Build(OpKind::kExpand, {}).status(), kInvalid, "Expand", "shape");
  ExpectError(
      Build(OpKind::kPad, {std::nullopt, Ints({0, 0})}, {{"mode", std::string("wrap")}}).status(),
      kUnimplemented, "Pad", "wrap");
  ExpectError(Build(OpKind::kPad, {std::nullopt, Ints({0, 0}), Ints({1, 2})}).status(), kInvalid,
              "Pad", "constant_value");
  ExpectError(Build(OpKind::kRange,
                    {Scalar(DType::kInt64, 0), Scalar(DType::kInt64, 5), Scalar(DType::kInt64, 0)})
                  .status(),
              kInvalid, "Range", "delta");
  ExpectError(Build(OpKind::kRange,
                    {Scalar(DType::kUint8, 0), Scalar(DType::kUint8, 5), Scalar(DType::kUint8, 1)})
                  .status(),
              kUnimplemented, "Range", "UINT8");
  ExpectError(Build(OpKind::kRange,
                    {Scalar(DType::kInt64, 0), Scalar(DType::kInt32, 5), Scalar(DType::kInt64, 1)})
                  .status(),
              kInvalid, "Range", "limit");
  ExpectError(Build(OpKind::kConstantOfShape, {Ints({2})}, {{"value", 1.0f}}).status(), kInvalid,
              "ConstantOfShape", "value");
  HostValue two = Ints({1, 2});
  ExpectError(Build(OpKind::kConstantOfShape, {Ints({2})}, {{"value", two}}).status(), kInvalid,
              "ConstantOfShape", "one element");
  ExpectError(Build(OpKind::kSplit, {}).status(), kInvalid, "Split", "output count");
  ExpectError(
      Build(OpKind::kSplit, {std::nullopt, Ints({1, 2})}, {{kNodeOutputCountAttr, int64_t{3}}})
          .status(),
      kInvalid, "Split", "3 outputs");
  ExpectError(Build(OpKind::kTrilu, {std::nullopt, Scalar(DType::kFp32, 1)}).status(), kInvalid,
              "Trilu", "integer");
  ExpectError(Build(OpKind::kTrilu, {}, {}, 13).status(), kUnimplemented, "Trilu", "opset 13");
}

TEST(DataRules, ShapeErrorsNameTheOpAndShapes) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const TensorDesc x = F32({2, 3, 4});
  ExpectError(InferError(OpKind::kSlice, {x}, SliceAttrs{{0}, {1}, {3}, {}}), kInvalid, "Slice",
              "axis 3 is out of range for data [2,3,4]");
  ExpectError(InferError(OpKind::kSlice, {x}, SliceAttrs{{0, 0}, {1, 1}, {1, -2}, {}}), kInvalid,
              "Slice", "twice");
  ExpectError(InferError(OpKind::kSlice, {x}, SliceAttrs{{0}, {1}, {}, {0}}), kInvalid, "Slice",
              "step");
  ExpectError(InferError(OpKind::kSlice, {x}, SliceAttrs{{0}, {1, 2}, {}, {}}), kInvalid, "Slice",
              "same length");
  ExpectError(InferError(OpKind::kExpand, {x}, ExpandAttrs{{2, 1}}), kInvalid, "Expand",
              "cannot expand [2,3,4] to shape [2,1]");
  ExpectError(InferError(OpKind::kTile, {x}, TileAttrs{{1, 2}}), kInvalid, "Tile", "[2,3,4]");
  ExpectError(InferError(OpKind::kTile, {x}, TileAttrs{{1, -1, 1}}), kInvalid, "Tile", "[1,-1,1]");
  ExpectError(InferError(OpKind::kSplit, {x}, SplitAttrs{1, {}, 2}), kInvalid, "Split", "evenly");
  ExpectError(InferError(OpKind::kSplit, {x}, SplitAttrs{-1, {1, 2}, 2}), kInvalid, "Split",
              "add up");
  ExpectError(InferError(OpKind::kSplit, {x}, SplitAttrs{3, {}, 1}), kInvalid, "Split", "axis");
  ExpectError(InferError(OpKind::kPad, {x}, PadAttrs{PadMode::kConstant, {1, 1}, {}}), kInvalid,
              "Pad", "2 entries per dim");
  ExpectError(InferError(OpKind::kPad, {x}, PadAttrs{PadMode::kReflect, {0, 0, 4, 0, 0, 0}, {}}),
              kInvalid, "Pad", "reflect");
  ExpectError(InferError(OpKind::kPad, {x}, PadAttrs{PadMode::kConstant, {0, -2, 0, 0, -2, 0}, {}}),
              kInvalid, "Pad", "crop");
  ExpectError(InferError(OpKind::kTrilu, {F32({5})}, TriluAttrs{}), kInvalid, "Trilu", "[5]");
  ExpectError(
      InferError(OpKind::kConstantOfShape, {}, ConstantOfShapeAttrs{{2, -1}, DType::kFp32, {}}),
      kInvalid, "ConstantOfShape", "[2,-1]");
  ExpectError(InferError(OpKind::kConstantOfShape, {x}, ConstantOfShapeAttrs{}), kInvalid,
              "ConstantOfShape", "inputs");
}

TEST(DataPlans, SliceClampsLikeOnnx) {
  // INT64_MAX / INT64_MIN ends, as exporters write "to the end" and reversal.
  auto r =
      ResolveSlice(Shape{5}, SliceAttrs{{kMax}, {std::numeric_limits<int64_t>::min()}, {}, {-1}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->out_shape, Shape{5});
  EXPECT_EQ(r->plan.offset, 4);
  r = ResolveSlice(Shape{5}, SliceAttrs{{-100}, {kMax}, {}, {2}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out_shape, Shape{3});
  r = ResolveSlice(Shape{5}, SliceAttrs{{4}, {1}, {}, {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out_shape, Shape{0});
  EXPECT_EQ(RangeCount(RangeAttrs{DType::kInt64, {false, 0, 0}, {false, 0, 10}, {false, 0, 3}})
                .value_or(-1),
            4);
  EXPECT_EQ(RangeCount(RangeAttrs{DType::kInt64, {false, 0, 5}, {false, 0, 10}, {false, 0, -1}})
                .value_or(-1),
            0);
}

class DataMovementTest : public ::testing::TestWithParam<Device> {
 protected:
  HostTensor Run(OpKind op, const std::vector<HostTensor>& in, const OpAttrs& attrs, int index = 0,
                 int num_outputs = 1) {
    DeviceRunner runner(GetParam());
    auto got = runner.Run(op, in, attrs, num_outputs);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return {};
    if (GetParam().is_cuda()) {
      DeviceRunner cpu(Device::Cpu());
      auto want = cpu.Run(op, in, attrs, num_outputs);
      EXPECT_TRUE(want.ok()) << want.status();
      if (want.ok()) EXPECT_TRUE(AllClose((*got)[index], (*want)[index], 0, 0)) << "CUDA vs CPU";
    }
    return (*got)[index];
  }
};

// Random slices of an INT16 tensor against an index-by-index reference.
TEST_P(DataMovementTest, SliceMatchesNaiveReference) {
  std::vector<int16_t> data(4 * 6 * 5);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int16_t>(i * 31 - 900);
  const Shape shape = {4, 6, 5};
  const HostTensor x = HostTensor::Of<int16_t>(shape, data);
  std::mt19937 gen(7);
  std::uniform_int_distribution<int64_t> index(-8, 8), stepd(-3, 3);
  for (int trial = 0; trial < 40; ++trial) {
    SliceAttrs a;
    for (int64_t axis = 0; axis < 3; ++axis) {
      if (gen() % 3 == 0) continue;
      int64_t step = stepd(gen);
      if (step == 0) step = 1;
      a.starts.push_back(index(gen));
      a.ends.push_back(gen() % 5 == 0 ? (step > 0 ? kMax : -kMax) : index(gen));
      a.axes.push_back(gen() % 2 ? axis : axis - 3);
      a.steps.push_back(step);
    }
    // Reference: per dim, the list of input indices it takes.
    std::vector<std::vector<int64_t>> take(3);
    for (int64_t d = 0; d < 3; ++d) {
      for (int64_t i = 0; i < shape[d]; ++i) take[d].push_back(i);
    }
    for (std::size_t k = 0; k < a.starts.size(); ++k) {
      const int64_t d = a.axes[k] < 0 ? a.axes[k] + 3 : a.axes[k];
      const int64_t n = shape[d], s = a.steps[k];
      auto norm = [&](int64_t v, int64_t lo, int64_t hi) {
        if (v < 0) v = v < -n ? -1 : v + n;
        return std::clamp(v, lo, hi);
      };
      take[d].clear();
      if (s > 0) {
        for (int64_t i = norm(a.starts[k], 0, n); i < norm(a.ends[k], 0, n); i += s) {
          take[d].push_back(i);
        }
      } else {
        for (int64_t i = norm(a.starts[k], -1, n - 1); i > norm(a.ends[k], -1, n - 1); i += s) {
          take[d].push_back(i);
        }
      }
    }
    std::vector<int16_t> want;
    for (int64_t i : take[0]) {
      for (int64_t j : take[1]) {
        for (int64_t l : take[2]) want.push_back(data[(i * 6 + j) * 5 + l]);
      }
    }
    const Shape out = {static_cast<int64_t>(take[0].size()), static_cast<int64_t>(take[1].size()),
                       static_cast<int64_t>(take[2].size())};
    EXPECT_TRUE(AllClose(Run(OpKind::kSlice, {x}, a), HostTensor::Of<int16_t>(out, want), 0, 0))
        << "trial " << trial;
  }
}

TEST_P(DataMovementTest, PadFp16WithConstantValueConvertsTheValue) {
  const HostTensor x = HostTensor::Of<uint16_t>(
      {1, 2}, {FloatToHalf(1.0f).bits, FloatToHalf(-2.0f).bits}, DType::kFp16);
  PadAttrs a{PadMode::kConstant, {0, 1, 1, 0}, {true, 1.5, 0}};
  const uint16_t f = FloatToHalf(1.5f).bits;
  const HostTensor want = HostTensor::Of<uint16_t>(
      {2, 3}, {f, FloatToHalf(1.0f).bits, FloatToHalf(-2.0f).bits, f, f, f}, DType::kFp16);
  EXPECT_TRUE(AllClose(Run(OpKind::kPad, {x}, a), want, 0, 0));
}

TEST_P(DataMovementTest, ExpandAndTileBool) {
  const HostTensor x = HostTensor::Of<uint8_t>({2, 1}, {1, 0}, DType::kBool);
  EXPECT_TRUE(AllClose(Run(OpKind::kExpand, {x}, ExpandAttrs{{2, 3}}),
                       HostTensor::Of<uint8_t>({2, 3}, {1, 1, 1, 0, 0, 0}, DType::kBool), 0, 0));
  EXPECT_TRUE(AllClose(Run(OpKind::kTile, {x}, TileAttrs{{2, 2}}),
                       HostTensor::Of<uint8_t>({4, 2}, {1, 1, 0, 0, 1, 1, 0, 0}, DType::kBool), 0,
                       0));
}

TEST_P(DataMovementTest, ConstantOfShapeInt64KeepsLargeValuesExact) {
  const int64_t big = (int64_t{1} << 60) + 1;  // not representable in a double
  ConstantOfShapeAttrs a{{3}, DType::kInt64, {false, 0.0, big}};
  EXPECT_TRUE(AllClose(Run(OpKind::kConstantOfShape, {}, a),
                       HostTensor::Of<int64_t>({3}, {big, big, big}), 0, 0));
}

TEST_P(DataMovementTest, SplitSecondOutputOfFp64) {
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) v[i] = i * 0.5;
  const HostTensor x = HostTensor::Of<double>({3, 4}, v);
  EXPECT_TRUE(AllClose(Run(OpKind::kSplit, {x}, SplitAttrs{1, {1, 3}, 2}, 1, 2),
                       HostTensor::Of<double>({3, 3}, {0.5, 1, 1.5, 2.5, 3, 3.5, 4.5, 5, 5.5}), 0,
                       0));
}

// An empty input padded in constant mode is all fill; reflect needs elements to mirror.
TEST_P(DataMovementTest, PadOfAnEmptyTensorIsAllFill) {
  const HostTensor x = HostTensor::Of<int32_t>({2, 0}, {});
  PadAttrs a{PadMode::kConstant, {0, 1, 1, 2}, {false, 0.0, 4}};
  EXPECT_TRUE(AllClose(Run(OpKind::kPad, {x}, a),
                       HostTensor::Of<int32_t>({3, 3}, {4, 4, 4, 4, 4, 4, 4, 4, 4}), 0, 0));
  a.mode = PadMode::kReflect;
  EXPECT_EQ(InferOutputs(OpKind::kPad, {x.desc()}, a).status().code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Devices, DataMovementTest, ::testing::ValuesIn(TestDevices()),
                         DeviceTestName);

}  // namespace
}  // namespace ndserve::kernels::testing
