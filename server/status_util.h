#ifndef NDSERVE_SERVER_STATUS_UTIL_H_
#define NDSERVE_SERVER_STATUS_UTIL_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ndserve {

// absl::Status and grpc::Status share the canonical code space (0..16), so the mapping
// is one-to-one in both directions and keeps the message. Codes outside that space
// (never made by our code) become UNKNOWN. ToGrpcStatus makes the message valid UTF-8
// and at most kMaxMessageBytes (base/text.h): messages quote client and file text, and a
// longer one would exceed gRPC's metadata limit and reach the client as
// RESOURCE_EXHAUSTED instead of the real code.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// "OK", "INVALID_ARGUMENT", ...: the spelling of the `code` label on request metrics
// and of codes in logs, the same as grpc's and absl's own names.
absl::string_view StatusCodeName(absl::StatusCode code);

}  // namespace ndserve

#endif  // NDSERVE_SERVER_STATUS_UTIL_H_
