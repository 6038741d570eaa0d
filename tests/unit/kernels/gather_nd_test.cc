// GatherND and NonZero on every device present, against naive references (on a GPU each
// result is also compared with the CPU kernel's); both move bits or count, so every
// comparison is exact. Also their shape inference, and the errors: a bad index, a full
// scratch pool.
#include <cmath>
#include <cstring>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/shape_inference.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// numpy's data[tuple(idx)] per index tuple, batch by batch.
HostTensor NaiveGatherND(const HostTensor& data, const HostTensor& indices, int64_t b) {
  const std::vector<int64_t> idx = indices.Values<int64_t>();
  const int64_t k = indices.shape.back();
  const int64_t esize = static_cast<int64_t>(DTypeSize(data.dtype));
  Shape out_shape(indices.shape.begin(), indices.shape.end() - 1);
  out_shape.insert(out_shape.end(), data.shape.begin() + b + k, data.shape.end());
  const int64_t slice = NumElements(ShapeSpan(data.shape).subspan(b + k));
  const int64_t tuples = NumElements(ShapeSpan(indices.shape).subspan(0, indices.shape.size() - 1));
  const int64_t batches = NumElements(ShapeSpan(data.shape).subspan(0, b));
  const int64_t per_batch = batches == 0 ? 0 : tuples / batches;
  const Shape strides = ContiguousStrides(data.shape);
  HostTensor out{data.dtype, out_shape, std::vector<uint8_t>(NumElements(out_shape) * esize)};
  // An empty slice copies nothing (and empty buffers have no data pointer to pass).
  for (int64_t g = 0; slice > 0 && g < tuples; ++g) {
    int64_t at = (g / per_batch) * (b == 0 ? 0 : strides[b - 1]);
    for (int64_t i = 0; i < k; ++i) {
      int64_t v = idx[g * k + i];
      if (v < 0) v += data.shape[b + i];
      at += v * strides[b + i];
    }
    std::memcpy(out.bytes.data() + g * slice * esize, data.bytes.data() + at * esize,
                slice * esize);
  }
  return out;
}

// numpy.nonzero stacked: [rank, count] (a 0-d input as one element of a 1-D one).
template <typename T>
HostTensor NaiveNonZero(const HostTensor& x) {
  const std::vector<T> v = x.Values<T>();
  const Shape dims = x.shape.empty() ? Shape{1} : x.shape;
  std::vector<int64_t> flat;
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    if (v[i] != T(0)) flat.push_back(i);
  }
  const int64_t count = static_cast<int64_t>(flat.size()), rank = dims.size();
  std::vector<int64_t> out(rank * count);
  for (int64_t j = 0; j < count; ++j) {
    int64_t rest = flat[j];
    for (int64_t d = rank - 1; d >= 0; --d) {
      out[d * count + j] = rest % dims[d];
      rest /= dims[d];
    }
  }
  return HostTensor::Of<int64_t>({rank, count}, out);
}

class DeviceOpTest : public ::testing::TestWithParam<Device> {
 protected:
  absl::StatusOr<std::vector<HostTensor>> TryRun(OpKind op, const std::vector<HostTensor>& in,
                                                 const OpAttrs& attrs) {
    DeviceRunner runner(GetParam());
    return runner.Run(op, in, attrs);
  }
  HostTensor Run(OpKind op, const std::vector<HostTensor>& in, const OpAttrs& attrs) {
    const std::vector<HostTensor> got = RunAndCrossCheck(GetParam(), op, in, attrs, 0, 0);
    return got.empty() ? HostTensor{} : got[0];
  }
};

class GatherNDTest : public DeviceOpTest {
 protected:
  void ExpectGather(const HostTensor& data, const HostTensor& idx, int64_t batch_dims) {
    const HostTensor got = Run(OpKind::kGatherND, {data, idx}, GatherNDAttrs{batch_dims});
    EXPECT_TRUE(AllClose(got, NaiveGatherND(data, idx, batch_dims), 0, 0));
  }
};

TEST_P(GatherNDTest, ElementsWithNegativeIndices) {
  const HostTensor data = RandomTensor({3, 4}, 1);
  const HostTensor idx =
      HostTensor::Of<int64_t>({5, 2}, {0, 0, 2, 3, -1, -4, 1, -2, -3, 1});
  const HostTensor got = Run(OpKind::kGatherND, {data, idx}, GatherNDAttrs{});
  const std::vector<float> x = data.Values<float>();
  EXPECT_THAT(got.Values<float>(), ElementsAre(x[0], x[11], x[8], x[6], x[1]));
  EXPECT_THAT(got.shape, ElementsAre(5));
}

TEST_P(GatherNDTest, SlicesOfInt64) {
  std::vector<int64_t> v(4 * 3 * 2);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i) * 1000003 - 7;
  const HostTensor data = HostTensor::Of<int64_t>({4, 3, 2}, v);
  ExpectGather(data, HostTensor::Of<int64_t>({2, 2, 1}, {3, -4, 0, 2}), 0);
  ExpectGather(data, HostTensor::Of<int64_t>({3, 2}, {3, -1, 0, 1, -2, 0}), 0);
}

TEST_P(GatherNDTest, BatchDims) {
  const HostTensor data = RandomTensor({2, 3, 4}, 2);
  ExpectGather(data, HostTensor::Of<int64_t>({2, 2, 1}, {2, -3, 1, 1}), 1);
  ExpectGather(data, HostTensor::Of<int64_t>({2, 1, 2}, {2, 3, -1, -4}), 1);
  ExpectGather(data, HostTensor::Of<int64_t>({2, 3, 1}, {0, 3, -1, 2, 1, -4}), 2);
  const HostTensor got = Run(OpKind::kGatherND,
                             {data, HostTensor::Of<int64_t>({2, 1}, {1, 2})}, GatherNDAttrs{1});
  const std::vector<float> x = data.Values<float>();
  std::vector<float> want(x.begin() + 4, x.begin() + 8);
  want.insert(want.end(), x.begin() + 20, x.begin() + 24);
  EXPECT_EQ(got.Values<float>(), want);
}

TEST_P(GatherNDTest, EveryElementWidth) {
  const HostTensor idx = HostTensor::Of<int64_t>({3, 1}, {2, 0, -1});
  ExpectGather(HostTensor::Of<uint8_t>({3, 5}, std::vector<uint8_t>(15, 7), DType::kBool), idx, 0);
  std::vector<int16_t> h(15);
  for (int i = 0; i < 15; ++i) h[i] = static_cast<int16_t>(i * 37);
  ExpectGather(HostTensor::Of<int16_t>({3, 5}, h, DType::kFp16), idx, 0);
  std::vector<double> d(15);
  for (int i = 0; i < 15; ++i) d[i] = i * 0.5 - 3;
  ExpectGather(HostTensor::Of<double>({3, 5}, d), idx, 0);
}

// Enough tuples and slice elements for many CUDA blocks.
TEST_P(GatherNDTest, ManyTuples) {
  const HostTensor data = RandomTensor({4, 33, 7, 5}, 3);
  std::vector<int64_t> idx;
  uint32_t s = 12345;
  for (int t = 0; t < 4 * 500; ++t) {
    s = s * 1664525u + 1013904223u;
    idx.push_back(static_cast<int64_t>((s >> 8) % 66) - 33);
    idx.push_back(static_cast<int64_t>((s >> 20) % 7));
  }
  ExpectGather(data, HostTensor::Of<int64_t>({4, 500, 2}, idx), 1);
}

TEST_P(GatherNDTest, ZeroSizeTensors) {
  // No tuples: empty output, nothing read.
  ExpectGather(RandomTensor({3, 4}, 4), HostTensor::Of<int64_t>({0, 2}, {}), 0);
  ExpectGather(RandomTensor({3, 4}, 4), HostTensor::Of<int64_t>({0, 1}, {}), 0);
  // Empty slices: the tuples are still read (and checked).
  ExpectGather(HostTensor::Of<float>({3, 0}, {}), HostTensor::Of<int64_t>({2, 1}, {2, -3}), 0);
  // No batches.
  ExpectGather(HostTensor::Of<float>({0, 3}, {}), HostTensor::Of<int64_t>({0, 4, 1}, {}), 1);
  const HostTensor got = Run(OpKind::kGatherND,
                             {HostTensor::Of<float>({3, 0}, {}),
                              HostTensor::Of<int64_t>({2, 1}, {2, -3})},
                             GatherNDAttrs{});
  EXPECT_THAT(got.shape, ElementsAre(2, 0));
}

TEST_P(GatherNDTest, OutOfRangeIndexIsInvalidArgument) {
  const HostTensor data = RandomTensor({2, 3, 4}, 5);
  for (int64_t bad : {int64_t{3}, int64_t{-4}, std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max()}) {
    const HostTensor idx = HostTensor::Of<int64_t>({2, 2, 2}, {0, 1, 1, 2, -1, bad, 0, 0});
    auto got = TryRun(OpKind::kGatherND, {data, idx}, GatherNDAttrs{});
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(got.status().message(), AllOf(HasSubstr("GatherND"), HasSubstr("out of range")));
    if (!GetParam().is_cuda()) {
      EXPECT_THAT(got.status().message(),
                  AllOf(HasSubstr(absl::StrCat("index ", bad)), HasSubstr("indices[1,0,1]"),
                        HasSubstr("dim 1 of size 3")));
    }
  }
  // With batch dims the dim named is data's.
  auto got = TryRun(OpKind::kGatherND, {data, HostTensor::Of<int64_t>({2, 1}, {0, 4})},
                    GatherNDAttrs{1});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  if (!GetParam().is_cuda()) {
    EXPECT_THAT(got.status().message(),
                AllOf(HasSubstr("index 4"), HasSubstr("indices[1,0]"), HasSubstr("dim 1 of size 3")));
  }
  // A tuple whose slice is empty is checked too.
  got = TryRun(OpKind::kGatherND,
               {HostTensor::Of<float>({3, 0}, {}), HostTensor::Of<int64_t>({2, 1}, {0, 3})},
               GatherNDAttrs{});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  // The context stays usable after the errors (the CUDA flag was cleared).
  DeviceRunner runner(GetParam());
  const HostTensor bad = HostTensor::Of<int64_t>({1, 3}, {0, 3, 0});
  EXPECT_EQ(runner.Run(OpKind::kGatherND, {data, bad}, GatherNDAttrs{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const HostTensor fine = HostTensor::Of<int64_t>({1, 3}, {1, 2, 3});
  auto ok = runner.Run(OpKind::kGatherND, {data, fine}, GatherNDAttrs{});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].Values<float>()[0], data.Values<float>()[23]);
}

// The CPU checks every tuple before it writes: a bad last tuple leaves the output as it was.
TEST(GatherNDCpuTest, BadIndexWritesNothing) {
  std::vector<float> data(12);
  for (int i = 0; i < 12; ++i) data[i] = static_cast<float>(i);
  std::vector<int64_t> idx = {0, 1, 2, 3, 1, 4};
  std::vector<float> out(3, -1.0f);
  const Device cpu = Device::Cpu();
  const TensorView in[] = {{data.data(), DType::kFp32, {3, 4}, cpu},
                           {idx.data(), DType::kInt64, {3, 2}, cpu}};
  const TensorView y[] = {{out.data(), DType::kFp32, {3}, cpu}};
  const absl::Status s = RunKernel(OpKind::kGatherND, KernelContext::Cpu(), in, y, GatherNDAttrs{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("indices[2,1]"));
  EXPECT_THAT(out, ElementsAre(-1.0f, -1.0f, -1.0f));
}

class NonZeroTest : public DeviceOpTest {
 protected:
  template <typename T>
  void ExpectNonZero(const HostTensor& x) {
    const HostTensor got = Run(OpKind::kNonZero, {x}, NoAttrs{});
    EXPECT_TRUE(AllClose(got, NaiveNonZero<T>(x), 0, 0)) << x.desc().ToString();
  }
};

TEST_P(NonZeroTest, Fp32ZerosNegativeZerosAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const HostTensor x = HostTensor::Of<float>(
      {3, 4}, {0.0f, 1.5f, -0.0f, -2.0f, 0.0f, 0.0f, nan, 1e-38f, -0.0f, 3.0f, 0.0f, -1e-45f});
  const HostTensor got = Run(OpKind::kNonZero, {x}, NoAttrs{});
  EXPECT_THAT(got.shape, ElementsAre(2, 6));
  EXPECT_THAT(got.Values<int64_t>(), ElementsAre(0, 0, 1, 1, 2, 2, 1, 3, 2, 3, 1, 3));
}

TEST_P(NonZeroTest, EveryInputType) {
  std::vector<uint8_t> b(2 * 5);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = (i * 7) % 3 == 0;
  ExpectNonZero<uint8_t>(HostTensor::Of<uint8_t>({2, 5}, b, DType::kBool));
  ExpectNonZero<uint8_t>(HostTensor::Of<uint8_t>({10}, {0, 255, 0, 1, 0, 0, 2, 0, 0, 9}));
  ExpectNonZero<int8_t>(HostTensor::Of<int8_t>({5, 2}, {0, -1, 0, 0, -128, 127, 0, 0, 1, 0}));
  std::vector<int32_t> i32(2 * 3 * 4);
  for (std::size_t i = 0; i < i32.size(); ++i) i32[i] = (i % 5 == 1) ? 0 : static_cast<int>(i) - 9;
  ExpectNonZero<int32_t>(HostTensor::Of<int32_t>({2, 3, 4}, i32));
  ExpectNonZero<int64_t>(HostTensor::Of<int64_t>(
      {2, 1, 2, 2}, {0, int64_t{1} << 40, 0, -1, 0, 0, std::numeric_limits<int64_t>::min(), 0}));
}

TEST_P(NonZeroTest, CountZero) {
  HostTensor got = Run(OpKind::kNonZero, {HostTensor::Of<float>({4, 3}, std::vector<float>(12, -0.0f))},
                       NoAttrs{});
  EXPECT_THAT(got.shape, ElementsAre(2, 0));
  got = Run(OpKind::kNonZero, {HostTensor::Of<float>({0, 5}, {})}, NoAttrs{});
  EXPECT_THAT(got.shape, ElementsAre(2, 0));
  got = Run(OpKind::kNonZero, {HostTensor::Of<int32_t>({3, 0, 2}, {})}, NoAttrs{});
  EXPECT_THAT(got.shape, ElementsAre(3, 0));
}

TEST_P(NonZeroTest, ScalarReadsAsOneElement) {
  HostTensor got = Run(OpKind::kNonZero, {HostTensor::Of<float>({}, {2.5f})}, NoAttrs{});
  EXPECT_THAT(got.shape, ElementsAre(1, 1));
  EXPECT_THAT(got.Values<int64_t>(), ElementsAre(0));
  got = Run(OpKind::kNonZero, {HostTensor::Of<int64_t>({}, {0})}, NoAttrs{});
  EXPECT_THAT(got.shape, ElementsAre(1, 0));
}

// Many tiles on CUDA, and more tiles than one block scans at once.
TEST_P(NonZeroTest, ManyTilesKeepRowMajorOrder) {
  const std::vector<float> r = RandomFloats(37 * 1024 + 5, 6);
  std::vector<float> x(r.size());
  for (std::size_t i = 0; i < r.size(); ++i) x[i] = r[i] > 1.0f ? r[i] : 0.0f;  // ~1/4 kept
  ExpectNonZero<float>(HostTensor::Of<float>({3, 12631}, x));
  const Shape big = {3, 1100, 347};  // 1119 tiles: the CUDA scan takes two passes
  std::vector<uint8_t> b(NumElements(big));
  uint32_t s = 99;
  for (uint8_t& v : b) {
    s = s * 1664525u + 1013904223u;
    v = (s >> 24) < 16;  // ~1/16 set
  }
  ExpectNonZero<uint8_t>(HostTensor::Of<uint8_t>(big, b, DType::kBool));
}

TEST_P(NonZeroTest, FullScratchIsResourceExhausted) {
  if (!GetParam().is_cuda()) GTEST_SKIP() << "the CPU kernel takes no scratch";
  DeviceRunner runner(GetParam());
  runner.scratch().set_limit(0);
  auto got = runner.Run(OpKind::kNonZero, {RandomTensor({8, 8}, 7)}, NoAttrs{});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << got.status();
}

INSTANTIATE_TEST_SUITE_P(Devices, GatherNDTest, ::testing::ValuesIn(TestDevices()),
                         DeviceTestName);
INSTANTIATE_TEST_SUITE_P(Devices, NonZeroTest, ::testing::ValuesIn(TestDevices()),
                         DeviceTestName);

TensorDesc F32(Shape s) { return {DType::kFp32, std::move(s)}; }
TensorDesc I64(Shape s) { return {DType::kInt64, std::move(s)}; }

absl::StatusOr<Shape> InferOne(OpKind op, std::vector<TensorDesc> in, OpAttrs attrs) {
  NDS_ASSIGN_OR_RETURN(std::vector<TensorDesc> out, InferOutputs(op, in, attrs));
  if (out.size() != 1) return absl::InternalError("not one output");
  return out[0].shape;
}

TEST(GatherNDShapeTest, OutputShapes) {
  EXPECT_THAT(*InferOne(OpKind::kGatherND, {F32({2, 3, 4}), I64({5, 2})}, GatherNDAttrs{}),
              ElementsAre(5, 4));
  EXPECT_THAT(*InferOne(OpKind::kGatherND, {F32({2, 3, 4}), I64({5, 6, 3})}, GatherNDAttrs{}),
              ElementsAre(5, 6));
  EXPECT_THAT(*InferOne(OpKind::kGatherND, {F32({2, 3, 4}), I64({2, 5, 1})}, GatherNDAttrs{1}),
              ElementsAre(2, 5, 4));
  EXPECT_THAT(*InferOne(OpKind::kGatherND, {F32({2, 3, 4}), I64({2, 3, 1})}, GatherNDAttrs{2}),
              ElementsAre(2, 3));
  EXPECT_THAT(*InferOne(OpKind::kGatherND, {F32({0, 3}), I64({0, 1})}, GatherNDAttrs{}),
              ElementsAre(0, 3));
}

TEST(GatherNDShapeTest, Errors) {
  auto code = [](std::vector<TensorDesc> in, int64_t b) {
    return InferOutputs(OpKind::kGatherND, in, GatherNDAttrs{b}).status().code();
  };
  using C = absl::StatusCode;
  EXPECT_EQ(code({F32({2, 3}), {DType::kInt32, {4, 1}}}, 0), C::kUnimplemented);  // INT64 only
  EXPECT_EQ(code({F32({2, 3}), I64({4, 3})}, 0), C::kInvalidArgument);  // k > rank
  EXPECT_EQ(code({F32({2, 3, 4}), I64({2, 3})}, 1), C::kInvalidArgument);  // k > rank - b
  EXPECT_EQ(code({F32({2, 3}), I64({4, 0})}, 0), C::kInvalidArgument);  // k = 0
  EXPECT_EQ(code({F32({2, 3, 4}), I64({3, 1})}, 1), C::kInvalidArgument);  // batch 2 vs 3
  EXPECT_EQ(code({F32({2, 3}), I64({2, 1})}, 2), C::kInvalidArgument);  // b = rank
  EXPECT_EQ(code({F32({}), I64({1})}, 0), C::kInvalidArgument);  // 0-d data
  EXPECT_EQ(code({F32({2}), I64({})}, 0), C::kInvalidArgument);  // 0-d indices
  EXPECT_EQ(code({F32({2})}, 0), C::kInvalidArgument);  // one input
  // Valid inputs whose output would hold 2^40 * 2^30 elements.
  EXPECT_EQ(code({F32({2, int64_t{1} << 30}), I64({int64_t{1} << 40, 1})}, 0),
            C::kInvalidArgument);
  const absl::Status s =
      InferOutputs(OpKind::kGatherND, {F32({2, 3, 4}), I64({3, 1})}, GatherNDAttrs{1}).status();
  EXPECT_THAT(s.message(), HasSubstr("batch dim 0"));
}

TEST(NonZeroShapeTest, RankByDataDependentCount) {
  EXPECT_THAT(*InferOne(OpKind::kNonZero, {F32({2, 3, 4})}, NoAttrs{}),
              ElementsAre(3, kDataDependentDim));
  EXPECT_THAT(*InferOne(OpKind::kNonZero, {F32({})}, NoAttrs{}), ElementsAre(1, kDataDependentDim));
  auto out = InferOutputs(OpKind::kNonZero, {{DType::kBool, {4}}}, NoAttrs{});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].dtype, DType::kInt64);
  EXPECT_EQ(InferOutputs(OpKind::kNonZero, {{DType::kFp16, {4}}}, NoAttrs{}).status().code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace ndserve::kernels::testing
