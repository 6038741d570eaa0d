#include "protocol/dims.h"

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ndserve::protocol {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DimsTest, ParsesSeparatedDims) {
  EXPECT_THAT(*ParseDims("1x3x224"), ElementsAre(1, 3, 224));
  EXPECT_THAT(*ParseDims("2,0", {.separator = ','}), ElementsAre(2, 0));
  EXPECT_THAT(*ParseDims("-1x64", {.allow_wildcard = true}), ElementsAre(-1, 64));
}

TEST(DimsTest, RefusesWhatTheRulesExclude) {
  EXPECT_FALSE(ParseDims("").ok());
  EXPECT_FALSE(ParseDims("1xx2").ok());
  EXPECT_FALSE(ParseDims("1xa").ok());
  EXPECT_FALSE(ParseDims("-1x2").ok());
  EXPECT_FALSE(ParseDims("-2x2", {.allow_wildcard = true}).ok());
  absl::StatusOr<std::vector<int64_t>> zero = ParseDims("0x2", {.allow_zero = false});
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("'0'"));
  EXPECT_THAT(zero.status().message(), HasSubstr("positive"));
}

TEST(DimsTest, FormatsAndCounts) {
  const std::vector<int64_t> dims = {2, 3, 4};
  EXPECT_EQ(FormatDims(dims), "[2,3,4]");
  EXPECT_EQ(FormatDims({}), "[]");
  EXPECT_EQ(*ElementCount(dims), 24);
  EXPECT_EQ(*ElementCount({}), 1);
  EXPECT_EQ(*ElementCount(std::vector<int64_t>{0, 5}), 0);
}

TEST(DimsTest, CountRefusesNegativeAndOverflow) {
  EXPECT_THAT(ElementCount(std::vector<int64_t>{0, -1}).status().message(), HasSubstr("negative"));
  const int64_t big = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_THAT(ElementCount(std::vector<int64_t>{big, 3}).status().message(),
              HasSubstr("overflow"));
}

}  // namespace
}  // namespace ndserve::protocol
