#include "server/tls_credentials.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ndserve {
namespace {

// Certificate chains and keys are a few KiB; the cap keeps a wrong path (a device, a
// huge file) from being read whole.
constexpr std::streamsize kMaxPemBytes = 1 << 20;

absl::Status Invalid(absl::string_view listener, absl::string_view suffix, absl::string_view value,
                     absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", listener, "_tls_", suffix, "='", value, "': ", why));
}

// The file's contents if it is a readable PEM file of at most kMaxPemBytes holding
// `marker` ("CERTIFICATE", "PRIVATE KEY").
absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view listener,
                                    absl::string_view suffix, absl::string_view marker) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Invalid(listener, suffix, path, "cannot be read");
  std::string contents(kMaxPemBytes + 1, '\0');
  in.read(contents.data(), kMaxPemBytes + 1);
  contents.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<std::streamsize>(contents.size()) > kMaxPemBytes) {
    return Invalid(listener, suffix, path, "larger than 1 MiB; not a PEM file");
  }
  if (!absl::StrContains(contents, "-----BEGIN ") || !absl::StrContains(contents, marker)) {
    return Invalid(listener, suffix, path, absl::StrCat("not a PEM file holding a ", marker));
  }
  return contents;
}

struct Pems {
  std::string cert;
  std::string key;
  std::string client_ca;
};

absl::StatusOr<Pems> ReadAll(const TlsFiles& files, absl::string_view listener) {
  if (files.cert.empty() != files.key.empty()) {
    const bool key_missing = files.key.empty();
    return absl::InvalidArgumentError(
        absl::StrCat("--", listener, "_tls_", key_missing ? "cert" : "key", " needs --", listener,
                     "_tls_", key_missing ? "key" : "cert"));
  }
  if (!files.client_ca.empty() && files.cert.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", listener, "_tls_client_ca needs --",
                                                   listener, "_tls_cert and --", listener,
                                                   "_tls_key (mutual TLS is TLS first)"));
  }
  Pems pems;
  if (files.cert.empty()) return pems;
  absl::StatusOr<std::string> cert = ReadPem(files.cert, listener, "cert", "CERTIFICATE");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(files.key, listener, "key", "PRIVATE KEY");
  if (!key.ok()) return key.status();
  pems.cert = *std::move(cert);
  pems.key = *std::move(key);
  if (!files.client_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(files.client_ca, listener, "client_ca", "CERTIFICATE");
    if (!ca.ok()) return ca.status();
    pems.client_ca = *std::move(ca);
  }
  return pems;
}

}  // namespace

absl::Status ValidateTlsFiles(const TlsFiles& files, absl::string_view listener) {
  return ReadAll(files, listener).status();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListenerCredentials(
    const TlsFiles& files, absl::string_view listener, int reload_seconds) {
  absl::StatusOr<Pems> pems = ReadAll(files, listener);
  if (!pems.ok()) return pems.status();
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  if (reload_seconds > 0) {
    auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        files.key, files.cert, files.client_ca, static_cast<unsigned int>(reload_seconds));
    grpc::experimental::TlsServerCredentialsOptions options(provider);
    options.watch_identity_key_cert_pairs();
    if (!files.client_ca.empty()) {
      options.watch_root_certs();
      options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    } else {
      options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    }
    return grpc::experimental::TlsServerCredentials(options);
  }
  grpc::SslServerCredentialsOptions options(
      pems->client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = pems->client_ca;
  options.pem_key_cert_pairs.push_back({pems->key, pems->cert});
  return grpc::SslServerCredentials(options);
}

}  // namespace ndserve
