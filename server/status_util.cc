#include "server/status_util.h"

#include <string>

#include "base/text.h"

namespace ndserve {
namespace {

// The canonical codes: 0 (OK) through 16 (UNAUTHENTICATED), identical in both APIs.
constexpr int kMaxCanonicalCode = 16;

bool IsCanonical(int code) { return code >= 0 && code <= kMaxCanonicalCode; }

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int raw = static_cast<int>(status.code());
  const grpc::StatusCode code =
      IsCanonical(raw) ? static_cast<grpc::StatusCode>(raw) : grpc::StatusCode::UNKNOWN;
  return grpc::Status(code, SafeUtf8(status.message(), kMaxMessageBytes));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const int raw = static_cast<int>(status.error_code());
  const absl::StatusCode code =
      IsCanonical(raw) ? static_cast<absl::StatusCode>(raw) : absl::StatusCode::kUnknown;
  return absl::Status(code, status.error_message());
}

absl::string_view StatusCodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return "OK";
    case absl::StatusCode::kCancelled:
      return "CANCELLED";
    case absl::StatusCode::kUnknown:
      return "UNKNOWN";
    case absl::StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound:
      return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case absl::StatusCode::kAborted:
      return "ABORTED";
    case absl::StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case absl::StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case absl::StatusCode::kInternal:
      return "INTERNAL";
    case absl::StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case absl::StatusCode::kDataLoss:
      return "DATA_LOSS";
    case absl::StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

}  // namespace ndserve
