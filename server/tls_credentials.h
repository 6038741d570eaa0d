#ifndef NDSERVE_SERVER_TLS_CREDENTIALS_H_
#define NDSERVE_SERVER_TLS_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grpc {
class ServerCredentials;
}  // namespace grpc

namespace ndserve {

// One listener's TLS settings, as PEM file paths: --<listener>_tls_cert, _tls_key and
// _tls_client_ca. All empty: plain text. A client CA turns on mutual TLS: a client must
// present a certificate that CA signed, else the handshake fails. Plain value.
struct TlsFiles {
  std::string cert;
  std::string key;
  std::string client_ca;

  bool enabled() const { return !cert.empty(); }
};

// Checks without side effects beyond reading the files: cert and key come together, a
// client CA only with them, and each file is a readable PEM file of at most 1 MiB.
// INVALID_ARGUMENT naming the flag (`listener` is "grpc" or "admin": "--grpc_tls_key").
absl::Status ValidateTlsFiles(const TlsFiles& files, absl::string_view listener);

// The credentials a listener binds with: insecure when TLS is off, else TLS from the PEM
// files, checked now (errors as ValidateTlsFiles). With `reload_seconds` 0 the files are
// read once; otherwise gRPC's FileWatcherCertificateProvider re-reads them that often and
// new handshakes use what it read (established connections keep theirs), so a rotated
// certificate needs no restart. Files should be replaced by rename, so that a reload
// never reads a key and a certificate from different rotations.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListenerCredentials(
    const TlsFiles& files, absl::string_view listener, int reload_seconds = 0);

}  // namespace ndserve

#endif  // NDSERVE_SERVER_TLS_CREDENTIALS_H_
