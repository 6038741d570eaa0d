#include "protocol/datatype.h"

#include "gtest/gtest.h"

namespace ndserve::protocol {
namespace {

TEST(DatatypeTest, WireNamesAreExact) {
  EXPECT_EQ(WireDatatypeIndex("FP32"), 11);
  EXPECT_EQ(kDatatypes[*WireDatatypeIndex("BYTES")].triton_name, "TYPE_STRING");
  EXPECT_EQ(WireDatatypeIndex("fp32"), std::nullopt);
  EXPECT_EQ(WireDatatypeIndex("TYPE_FP32"), std::nullopt);
  EXPECT_EQ(WireDatatypeIndex(""), std::nullopt);
}

TEST(DatatypeTest, ElementSizes) {
  EXPECT_EQ(ElementSize("BOOL"), 1);
  EXPECT_EQ(ElementSize("UINT16"), 2);
  EXPECT_EQ(ElementSize("BF16"), 2);
  EXPECT_EQ(ElementSize("INT32"), 4);
  EXPECT_EQ(ElementSize("FP64"), 8);
  EXPECT_EQ(ElementSize("BYTES"), 0);
  EXPECT_EQ(ElementSize("FP8"), -1);
}

TEST(DatatypeTest, ParseAcceptsCaseAndTritonSpellings) {
  EXPECT_EQ(*ParseDatatypeIndex("fp16"), *WireDatatypeIndex("FP16"));
  EXPECT_EQ(*ParseDatatypeIndex(" TYPE_INT8 "), *WireDatatypeIndex("INT8"));
  EXPECT_EQ(*ParseDatatypeIndex("TYPE_STRING"), *WireDatatypeIndex("BYTES"));
  EXPECT_EQ(*ParseDatatypeIndex("string"), *WireDatatypeIndex("BYTES"));
  for (int i = 0; i < static_cast<int>(kDatatypes.size()); ++i) {
    EXPECT_EQ(*ParseDatatypeIndex(kDatatypes[i].name), i);
    EXPECT_EQ(*ParseDatatypeIndex(kDatatypes[i].triton_name), i);
  }
  absl::StatusOr<int> bad = ParseDatatypeIndex("FLOAT");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'FLOAT'"), absl::string_view::npos);
}

}  // namespace
}  // namespace ndserve::protocol
