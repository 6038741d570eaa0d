#ifndef NDSERVE_SERVER_ADMIN_AUTH_H_
#define NDSERVE_SERVER_ADMIN_AUTH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace grpc {
class ServerContext;
}  // namespace grpc

namespace ndserve {

// The admin API's token rule: with a token configured, every call must carry the
// metadata `authorization: Bearer <token>`; without one, every call passes (the options
// check keeps such a listener on loopback). Immutable after construction, so
// thread-safe.
class AdminAuth {
 public:
  // Empty `token`: no authentication.
  explicit AdminAuth(std::string token = {}) : token_(std::move(token)) {}

  bool enabled() const { return !token_.empty(); }
  // OK, or UNAUTHENTICATED saying what was missing (never echoing what was sent).
  absl::Status Check(const grpc::ServerContext& context) const;
  // The same rule on the raw metadata value ("" when the header is absent).
  absl::Status CheckHeader(absl::string_view authorization) const;

  // Compares in time that depends only on the lengths, so that the response time does
  // not reveal how many leading characters of a guess were right.
  static bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

 private:
  const std::string token_;
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_ADMIN_AUTH_H_
