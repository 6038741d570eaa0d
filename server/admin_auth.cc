#include "server/admin_auth.h"

#include <grpcpp/server_context.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace ndserve {

bool AdminAuth::ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Walk the longer of the two in full; volatile keeps the compiler from stopping early.
  const size_t n = std::max(a.size(), b.size());
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

absl::Status AdminAuth::CheckHeader(absl::string_view authorization) const {
  if (!enabled()) return absl::OkStatus();
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "the admin API requires metadata 'authorization: Bearer <token>'");
  }
  constexpr absl::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme)) {
    return absl::UnauthenticatedError("the admin API accepts only 'Bearer' authorization");
  }
  const absl::string_view presented =
      absl::StripAsciiWhitespace(authorization.substr(kScheme.size()));
  if (!ConstantTimeEquals(presented, token_)) {
    return absl::UnauthenticatedError("invalid admin token");
  }
  return absl::OkStatus();
}

absl::Status AdminAuth::Check(const grpc::ServerContext& context) const {
  if (!enabled()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return CheckHeader("");
  return CheckHeader(absl::string_view(it->second.data(), it->second.size()));
}

}  // namespace ndserve
