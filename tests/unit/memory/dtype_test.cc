#include "memory/dtype.h"

#include "gtest/gtest.h"
#include "memory/manager_levels.h"

namespace ndserve {
namespace {

TEST(DTypeTest, SizesFollowKServeV2) {
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(DTypeSize(DType::kUint8), 1u);
  EXPECT_EQ(DTypeSize(DType::kUint16), 2u);
  EXPECT_EQ(DTypeSize(DType::kUint32), 4u);
  EXPECT_EQ(DTypeSize(DType::kUint64), 8u);
  EXPECT_EQ(DTypeSize(DType::kInt8), 1u);
  EXPECT_EQ(DTypeSize(DType::kInt16), 2u);
  EXPECT_EQ(DTypeSize(DType::kInt32), 4u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_EQ(DTypeSize(DType::kFp16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBf16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFp32), 4u);
  EXPECT_EQ(DTypeSize(DType::kFp64), 8u);
  EXPECT_EQ(DTypeSize(DType::kBytes), 0u);
  EXPECT_FALSE(DTypeIsFixedSize(DType::kBytes));
  EXPECT_TRUE(DTypeIsFixedSize(DType::kBf16));
}

TEST(DTypeTest, NamesRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType dtype = static_cast<DType>(i);
    absl::StatusOr<DType> parsed = ParseDType(DTypeName(dtype));
    ASSERT_TRUE(parsed.ok()) << DTypeName(dtype);
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_EQ(DTypeName(DType::kFp32), "FP32");
  EXPECT_EQ(DTypeName(DType::kBytes), "BYTES");
}

TEST(DTypeTest, ParseAcceptsCaseAndTritonSpelling) {
  EXPECT_EQ(*ParseDType("fp16"), DType::kFp16);
  EXPECT_EQ(*ParseDType("TYPE_INT64"), DType::kInt64);
  EXPECT_EQ(*ParseDType("TYPE_STRING"), DType::kBytes);
  absl::StatusOr<DType> bad = ParseDType("FP8");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("FP8"), absl::string_view::npos);
}

TEST(DTypeTest, CppTypesMapToDTypes) {
  EXPECT_EQ(kDTypeOf<float>, DType::kFp32);
  EXPECT_EQ(kDTypeOf<double>, DType::kFp64);
  EXPECT_EQ(kDTypeOf<std::int64_t>, DType::kInt64);
  EXPECT_EQ(kDTypeOf<std::uint8_t>, DType::kUint8);
  EXPECT_EQ(kDTypeOf<bool>, DType::kBool);
}

TEST(ManagerLevelTest, NamesAreMetricLabels) {
  EXPECT_EQ(ManagerLevelName(ManagerLevel::kSystem), "system");
  EXPECT_EQ(ManagerLevelName(ManagerLevel::kModel), "model");
  EXPECT_EQ(ManagerLevelName(ManagerLevel::kPredictor), "predictor");
  EXPECT_EQ(ManagerLevelName(ManagerLevel::kContext), "context");
  EXPECT_EQ(ManagerLevelName(ManagerLevel::kTrainer), "trainer");
  EXPECT_EQ(ManagerLevelName(ManagerLevel::kBatch), "batch");
}

}  // namespace
}  // namespace ndserve
