#include "server/status_util.h"

#include "gtest/gtest.h"

namespace ndserve {
namespace {

TEST(StatusUtilTest, EveryCanonicalCodeRoundTrips) {
  for (int code = 0; code <= 16; ++code) {
    const absl::Status in(static_cast<absl::StatusCode>(code), code == 0 ? "" : "why");
    const grpc::Status wire = ToGrpcStatus(in);
    EXPECT_EQ(static_cast<int>(wire.error_code()), code);
    if (code != 0) EXPECT_EQ(wire.error_message(), "why");
    EXPECT_EQ(FromGrpcStatus(wire), in);
  }
}

TEST(StatusUtilTest, NonCanonicalCodesBecomeUnknown) {
  const absl::Status odd(static_cast<absl::StatusCode>(42), "odd");
  EXPECT_EQ(ToGrpcStatus(odd).error_code(), grpc::StatusCode::UNKNOWN);
  EXPECT_EQ(ToGrpcStatus(odd).error_message(), "odd");
}

TEST(StatusUtilTest, CodeNamesMatchGrpcSpelling) {
  EXPECT_EQ(StatusCodeName(absl::StatusCode::kOk), "OK");
  EXPECT_EQ(StatusCodeName(absl::StatusCode::kInvalidArgument), "INVALID_ARGUMENT");
  EXPECT_EQ(StatusCodeName(absl::StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(StatusCodeName(absl::StatusCode::kUnauthenticated), "UNAUTHENTICATED");
}

}  // namespace
}  // namespace ndserve
