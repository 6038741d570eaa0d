// base/text.h: the one helper that makes client and file text safe for protobuf strings,
// status messages and log lines.
#include "base/text.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/status_util.h"

namespace ndserve {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(TextTest, RecognisesValidAndInvalidUtf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("a\xC3"));              // truncated sequence
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));           // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));       // UTF-16 surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));   // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\x80 continuation"));  // stray continuation byte
}

TEST(TextTest, SafeUtf8ReplacesBadBytesAndKeepsGoodText) {
  EXPECT_EQ(SafeUtf8("name: \"a\xFF"
                     "b\""),
            "name: \"a\xEF\xBF\xBD"
            "b\"");
  EXPECT_EQ(SafeUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(SafeUtf8("\xC3"), "\xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8(SafeUtf8(std::string("\xF0\x9F\x98", 3) + "\xFF\xFE")));
}

TEST(TextTest, SafeUtf8CutsLongTextAtACharacterBoundaryAndSaysHowLong) {
  const std::string text = "x" + std::string(3000, 'a');
  const std::string safe = SafeUtf8(text, 100);
  EXPECT_LE(safe.size(), 100u);
  EXPECT_THAT(safe, StartsWith("xaaa"));
  EXPECT_THAT(safe, HasSubstr("...(3001 bytes)"));

  // Two-byte characters: the cut never leaves half of one.
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "\xC3\xA9";
  for (size_t limit = 40; limit < 60; ++limit) {
    const std::string cut = SafeUtf8(accents, limit);
    EXPECT_LE(cut.size(), limit);
    EXPECT_TRUE(IsValidUtf8(cut)) << limit;
  }
  // Text exactly at the limit stays whole.
  EXPECT_EQ(SafeUtf8(std::string(100, 'b'), 100), std::string(100, 'b'));
}

TEST(TextTest, ClipNameKeepsNamesShort) {
  EXPECT_EQ(ClipName("mlp"), "mlp");
  const std::string clipped = ClipName(std::string(100'000, 'n'));
  EXPECT_LE(clipped.size(), 64u);
  EXPECT_THAT(clipped, HasSubstr("(100000 bytes)"));
}

TEST(TextTest, CheckNameRefusesLongAndBinaryNames) {
  EXPECT_TRUE(CheckName("model name", "mlp").ok());
  EXPECT_TRUE(CheckName("model name", std::string(kMaxNameBytes, 'm')).ok());
  const absl::Status long_name = CheckName("model name", std::string(100'000, 'm'));
  EXPECT_EQ(long_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(long_name.message(), HasSubstr("model name"));
  EXPECT_THAT(long_name.message(), HasSubstr("100000 bytes long; at most 256"));
  EXPECT_LT(long_name.message().size(), 200u);
  const absl::Status binary = CheckName("input name", "in\xFFput");
  EXPECT_EQ(binary.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(binary.message(), HasSubstr("not valid UTF-8"));
  EXPECT_TRUE(IsValidUtf8(binary.message()));
}

// Every handler's status goes through ToGrpcStatus: its message must always be sendable.
TEST(TextTest, GrpcStatusMessagesAreValidUtf8AndBounded) {
  const grpc::Status bad = ToGrpcStatus(absl::InvalidArgumentError("config.pbtxt: \xFF"));
  EXPECT_TRUE(IsValidUtf8(bad.error_message()));
  EXPECT_THAT(bad.error_message(), HasSubstr("config.pbtxt: \xEF\xBF\xBD"));
  const grpc::Status huge = ToGrpcStatus(absl::NotFoundError(std::string(100'000, 'q')));
  EXPECT_EQ(huge.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LE(huge.error_message().size(), kMaxMessageBytes);
}

}  // namespace
}  // namespace ndserve
