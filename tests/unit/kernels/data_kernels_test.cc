// Data-movement kernels (Gather, ScatterND, GatherElements, ScatterElements, Transpose, Concat, the
// shape-only copies) and Cast on every device present, against naive references; on a GPU each
// result is also compared with the CPU kernel's. All of these move or convert bits, so every
// comparison is exact.
#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::kernels::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class DataKernelsTest : public ::testing::TestWithParam<Device> {
 protected:
  absl::StatusOr<std::vector<HostTensor>> TryRun(OpKind op, const std::vector<HostTensor>& in,
                                                 const OpAttrs& attrs) {
    DeviceRunner runner(GetParam());
    return runner.Run(op, in, attrs);
  }
  HostTensor Run(OpKind op, const std::vector<HostTensor>& in, const OpAttrs& attrs) {
    auto got = TryRun(op, in, attrs);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return {};
    if (GetParam().is_cuda()) {
      DeviceRunner cpu(Device::Cpu());
      auto want = cpu.Run(op, in, attrs);
      EXPECT_TRUE(want.ok()) << want.status();
      if (want.ok()) {
        EXPECT_TRUE(AllClose((*got)[0], (*want)[0], 0, 0)) << "CUDA vs CPU";
      }
    }
    return (*got)[0];
  }
};

TEST_P(DataKernelsTest, GatherEmbeddingRows) {
  const int64_t rows = 1000, dim = 32;
  const HostTensor table = RandomTensor({rows, dim}, 1);
  std::vector<int64_t> ids;
  for (int i = 0; i < 64; ++i) ids.push_back((i * 379) % rows - (i % 3 == 0 ? rows : 0));
  const HostTensor idx = HostTensor::Of<int64_t>({8, 8}, ids);
  const HostTensor got = Run(OpKind::kGather, {table, idx}, GatherAttrs{0});
  const std::vector<float> tv = table.Values<float>();
  std::vector<float> want;
  for (int64_t id : ids) {
    const int64_t r = id < 0 ? id + rows : id;
    want.insert(want.end(), tv.begin() + r * dim, tv.begin() + (r + 1) * dim);
  }
  EXPECT_TRUE(AllClose(got, HostTensor::Of<float>({8, 8, dim}, want), 0, 0));
}

TEST_P(DataKernelsTest, GatherInnerAxisInt32IndicesInt8Data) {
  std::vector<int8_t> data(2 * 5 * 3);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int8_t>(i * 7 - 100);
  const HostTensor x = HostTensor::Of<int8_t>({2, 5, 3}, data);
  const HostTensor idx = HostTensor::Of<int32_t>({2}, {4, -5});
  const HostTensor got = Run(OpKind::kGather, {x, idx}, GatherAttrs{1});
  std::vector<int8_t> want;
  for (int o = 0; o < 2; ++o) {
    for (int j : {4, 0}) {
      for (int c = 0; c < 3; ++c) want.push_back(data[(o * 5 + j) * 3 + c]);
    }
  }
  EXPECT_TRUE(AllClose(got, HostTensor::Of<int8_t>({2, 2, 3}, want), 0, 0));
}

TEST_P(DataKernelsTest, GatherOutOfRangeIsInvalidArgument) {
  const HostTensor table = RandomTensor({10, 4}, 2);
  for (int64_t bad : {int64_t{10}, int64_t{-11}, std::numeric_limits<int64_t>::max()}) {
    auto got =
        TryRun(OpKind::kGather, {table, HostTensor::Of<int64_t>({3}, {0, bad, 1})}, GatherAttrs{0});
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(got.status().message(), HasSubstr("out of range"));
    EXPECT_THAT(got.status().message(), HasSubstr("size 10"));
  }
  // The context stays usable after the error.
  auto ok = TryRun(OpKind::kGather, {table, HostTensor::Of<int64_t>({1}, {9})}, GatherAttrs{0});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

// PyTorch's indexed assignment on a batch of images: rows 1 and 3 of every image in
// [2, 5, 8] replaced, tuples of two coordinates, one negative.
TEST_P(DataKernelsTest, ScatterNDReplacesTheSlicesOfEachTuple) {
  const HostTensor data = RandomTensor({2, 5, 8}, 3);
  const std::vector<int64_t> tuples = {0, 1, 0, -2, 1, 1, 1, 3};
  const HostTensor idx = HostTensor::Of<int64_t>({2, 2, 2}, tuples);
  const HostTensor updates = RandomTensor({2, 2, 8}, 4);
  const HostTensor got = Run(OpKind::kScatterND, {data, idx, updates}, ScatterNDAttrs{});
  std::vector<float> want = data.Values<float>();
  const std::vector<float> uv = updates.Values<float>();
  for (int t = 0; t < 4; ++t) {
    const int64_t row = tuples[2 * t + 1] < 0 ? tuples[2 * t + 1] + 5 : tuples[2 * t + 1];
    for (int j = 0; j < 8; ++j) want[(tuples[2 * t] * 5 + row) * 8 + j] = uv[t * 8 + j];
  }
  EXPECT_TRUE(AllClose(got, HostTensor::Of<float>({2, 5, 8}, want), 0, 0));
}

TEST_P(DataKernelsTest, ScatterNDOutOfRangeIsInvalidArgument) {
  const HostTensor data = RandomTensor({4, 3}, 5);
  const HostTensor updates = RandomTensor({2, 3}, 6);
  for (int64_t bad : {int64_t{4}, int64_t{-5}, std::numeric_limits<int64_t>::min()}) {
    auto got = TryRun(OpKind::kScatterND,
                      {data, HostTensor::Of<int64_t>({2, 1}, {1, bad}), updates}, ScatterNDAttrs{});
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(got.status().message(), HasSubstr("out of range"));
  }
  auto ok = TryRun(OpKind::kScatterND, {data, HostTensor::Of<int64_t>({2, 1}, {3, -4}), updates},
                   ScatterNDAttrs{});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

// torch.gather along the middle axis of [3, 4, 5] with [3, 6, 2] indices: more indices
// than the axis is long, and a last dim smaller than data's.
TEST_P(DataKernelsTest, GatherElementsReadsAlongTheAxis) {
  const HostTensor data = RandomTensor({3, 4, 5}, 7);
  std::vector<int64_t> ids(3 * 6 * 2);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 5) % 8) - 4;
  const HostTensor idx = HostTensor::Of<int64_t>({3, 6, 2}, ids);
  const HostTensor got = Run(OpKind::kGatherElements, {data, idx}, ElementsAttrs{1});
  const std::vector<float> dv = data.Values<float>();
  std::vector<float> want;
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t b = 0; b < 6; ++b) {
      for (int64_t c = 0; c < 2; ++c) {
        int64_t v = ids[(a * 6 + b) * 2 + c];
        if (v < 0) v += 4;
        want.push_back(dv[(a * 4 + v) * 5 + c]);
      }
    }
  }
  EXPECT_TRUE(AllClose(got, HostTensor::Of<float>({3, 6, 2}, want), 0, 0));
}

// scatter_add of 300 updates onto 3 x 4 targets: each target's sum must round as the
// updates' index order gives it, on every device.
TEST_P(DataKernelsTest, ScatterElementsAddFoldsRepeatsInIndexOrder) {
  const HostTensor data = RandomTensor({3, 4}, 8);
  const HostTensor updates = RandomTensor({100, 4}, 9);
  std::vector<int32_t> ids(100 * 4);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7) % 3);
  const HostTensor idx = HostTensor::Of<int32_t>({100, 4}, ids);
  ElementsAttrs a{0, ScatterReduction::kAdd};
  const HostTensor got = Run(OpKind::kScatterElements, {data, idx, updates}, a);
  std::vector<float> want = data.Values<float>();
  const std::vector<float> uv = updates.Values<float>();
  for (std::size_t i = 0; i < ids.size(); ++i) want[ids[i] * 4 + i % 4] += uv[i];
  EXPECT_TRUE(AllClose(got, HostTensor::Of<float>({3, 4}, want), 0, 0));
}

TEST_P(DataKernelsTest, ElementsOutOfRangeIsInvalidArgumentNamingTheOp) {
  const HostTensor data = RandomTensor({4, 3}, 10);
  const HostTensor updates = RandomTensor({2, 3}, 11);
  for (int64_t bad : {int64_t{4}, int64_t{-5}, std::numeric_limits<int64_t>::min()}) {
    const HostTensor idx = HostTensor::Of<int64_t>({2, 3}, {0, 1, 2, 3, bad, -4});
    auto g = TryRun(OpKind::kGatherElements, {data, idx}, ElementsAttrs{0});
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(g.status().message(),
                AllOf(HasSubstr("GatherElements"), HasSubstr("out of range")));
    auto s = TryRun(OpKind::kScatterElements, {data, idx, updates}, ElementsAttrs{0});
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.status().message(),
                AllOf(HasSubstr("ScatterElements"), HasSubstr("out of range")));
  }
  // The context stays usable after the errors.
  const HostTensor idx = HostTensor::Of<int64_t>({2, 3}, {0, 1, 2, 3, -1, -4});
  EXPECT_TRUE(TryRun(OpKind::kGatherElements, {data, idx}, ElementsAttrs{0}).ok());
  EXPECT_TRUE(TryRun(OpKind::kScatterElements, {data, idx, updates}, ElementsAttrs{0}).ok());
}

TEST_P(DataKernelsTest, TransposeFiveDims) {
  const Shape s = {2, 3, 4, 5, 6};
  const std::vector<int64_t> perm = {4, 1, 3, 0, 2};
  std::vector<int16_t> data(NumElements(s));
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int16_t>(i);
  const HostTensor x = HostTensor::Of<int16_t>(s, data);
  const HostTensor got = Run(OpKind::kTranspose, {x}, TransposeAttrs{perm});
  Shape out;
  for (int64_t p : perm) out.push_back(s[p]);
  const Shape in_str = ContiguousStrides(s), out_str = ContiguousStrides(out);
  std::vector<int16_t> want(data.size());
  for (int64_t i = 0; i < static_cast<int64_t>(want.size()); ++i) {
    int64_t src = 0;
    for (int d = 0; d < 5; ++d) src += ((i / out_str[d]) % out[d]) * in_str[perm[d]];
    want[i] = data[src];
  }
  EXPECT_TRUE(AllClose(got, HostTensor::Of<int16_t>(out, want), 0, 0));
}

TEST_P(DataKernelsTest, ConcatInt64AlongInnerAxis) {
  std::vector<HostTensor> in;
  std::vector<std::vector<int64_t>> parts;
  for (int64_t w : {1, 4, 0, 3}) {
    std::vector<int64_t> v(2 * 3 * w);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(w * 1000 + i);
    parts.push_back(v);
    in.push_back(HostTensor::Of<int64_t>({2, 3, w}, v));
  }
  const HostTensor got = Run(OpKind::kConcat, in, ConcatAttrs{2});
  std::vector<int64_t> want;
  for (int row = 0; row < 6; ++row) {
    for (const auto& [p, w] :
         {std::pair{&parts[0], 1}, {&parts[1], 4}, {&parts[2], 0}, {&parts[3], 3}}) {
      for (int c = 0; c < w; ++c) want.push_back((*p)[row * w + c]);
    }
  }
  EXPECT_TRUE(AllClose(got, HostTensor::Of<int64_t>({2, 3, 8}, want), 0, 0));
}

TEST_P(DataKernelsTest, ShapeOpsCopyBytesOrAliasInPlace) {
  const HostTensor x = RandomTensor({2, 3, 4}, 3);
  EXPECT_TRUE(AllClose(Run(OpKind::kReshape, {x}, ReshapeAttrs{{4, -1}, false}),
                       HostTensor{x.dtype, {4, 6}, x.bytes}, 0, 0));
  EXPECT_TRUE(AllClose(Run(OpKind::kFlatten, {x}, FlattenAttrs{2}),
                       HostTensor{x.dtype, {6, 4}, x.bytes}, 0, 0));
  EXPECT_TRUE(AllClose(Run(OpKind::kUnsqueeze, {x}, UnsqueezeAttrs{{1}}),
                       HostTensor{x.dtype, {2, 1, 3, 4}, x.bytes}, 0, 0));
  EXPECT_TRUE(AllClose(Run(OpKind::kIdentity, {x}, NoAttrs{}), x, 0, 0));
  // Output == input: nothing moves, nothing breaks.
  DeviceRunner runner(GetParam());
  auto in = runner.Upload(x);
  ASSERT_TRUE(in.ok());
  TensorView out = *in;
  out.shape = {1, 2, 3, 4};
  ASSERT_TRUE(
      RunKernel(OpKind::kUnsqueeze, runner.context(), {*in}, {out}, UnsqueezeAttrs{{0}}).ok());
  auto back = runner.Download(out);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->bytes, x.bytes);
}

TEST_P(DataKernelsTest, CastSaturatesAndRounds) {
  const HostTensor f =
      HostTensor::Of<float>({8}, {1.9f, -1.9f, 300.0f, -300.0f, NAN, INFINITY, -0.5f, 127.5f});
  EXPECT_THAT(Run(OpKind::kCast, {f}, CastAttrs{DType::kInt8}).Values<int8_t>(),
              ElementsAre(1, -1, 127, -128, 0, 127, 0, 127));
  EXPECT_THAT(Run(OpKind::kCast, {f}, CastAttrs{DType::kUint8}).Values<uint8_t>(),
              ElementsAre(1, 0, 255, 0, 0, 255, 0, 127));
  const HostTensor big = HostTensor::Of<double>({3}, {1e30, -1e30, 9.2233720368547758e18});
  EXPECT_THAT(Run(OpKind::kCast, {big}, CastAttrs{DType::kInt64}).Values<int64_t>(),
              ElementsAre(std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                          std::numeric_limits<int64_t>::max()));
  // Integers narrow by wrapping; BOOL bytes other than 0/1 read as true.
  const HostTensor wide = HostTensor::Of<int64_t>({2}, {(int64_t{1} << 32) + 5, -1});
  EXPECT_THAT(Run(OpKind::kCast, {wide}, CastAttrs{DType::kInt32}).Values<int32_t>(),
              ElementsAre(5, -1));
  const HostTensor bools = HostTensor::Of<uint8_t>({3}, {0, 1, 7}, DType::kBool);
  EXPECT_THAT(Run(OpKind::kCast, {bools}, CastAttrs{DType::kFp32}).Values<float>(),
              ElementsAre(0.0f, 1.0f, 1.0f));
  // FP32 -> FP16 -> FP32 and BF16 round to nearest even.
  const HostTensor g = HostTensor::Of<float>({4}, {1.0f + 1.0f / 2048, 65520.0f, 1e-8f, 3.0f});
  const HostTensor h = Run(OpKind::kCast, {g}, CastAttrs{DType::kFp16});
  EXPECT_THAT(Run(OpKind::kCast, {h}, CastAttrs{DType::kFp32}).Values<float>(),
              ElementsAre(1.0f, INFINITY, 0.0f, 3.0f));
  const HostTensor bf = Run(OpKind::kCast, {g}, CastAttrs{DType::kBf16});
  EXPECT_THAT(Run(OpKind::kCast, {bf}, CastAttrs{DType::kFp32}).Values<float>(),
              ElementsAre(1.0f, 65536.0f, ::testing::FloatNear(1e-8f, 1e-10f), 3.0f));
}

TEST_P(DataKernelsTest, CastEveryPairAgreesWithCpu) {
  // Every (from, to) pair of fixed-size types on the same source bits; on a GPU the Run
  // helper checks the result against the CPU's bit for bit.
  const HostTensor src = HostTensor::Of<float>({6}, {0.0f, 1.0f, -2.5f, 100.75f, 1e10f, NAN});
  for (int f = 0; f < kNumDTypes; ++f) {
    const DType from = static_cast<DType>(f);
    if (!DTypeIsFixedSize(from)) continue;
    const HostTensor x = Run(OpKind::kCast, {src}, CastAttrs{from});
    for (int t = 0; t < kNumDTypes; ++t) {
      const DType to = static_cast<DType>(t);
      if (!DTypeIsFixedSize(to)) continue;
      const HostTensor y = Run(OpKind::kCast, {x}, CastAttrs{to});
      EXPECT_EQ(y.dtype, to);
      EXPECT_EQ(y.bytes.size(), 6 * DTypeSize(to)) << DTypeName(from) << "->" << DTypeName(to);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DataKernelsTest, ::testing::ValuesIn(TestDevices()),
                         DeviceTestName);

TEST(CastConvert, HalfRoundTripsEveryValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const Half h{static_cast<uint16_t>(bits)};
    const float f = HalfToFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
    } else {
      ASSERT_EQ(FloatToHalf(f).bits, bits) << std::hex << bits;
    }
  }
}

}  // namespace
}  // namespace ndserve::kernels::testing
