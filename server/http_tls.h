#ifndef NDSERVE_SERVER_HTTP_TLS_H_
#define NDSERVE_SERVER_HTTP_TLS_H_

#include <chrono>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/tls_credentials.h"

// OpenSSL's types, as <openssl/ssl.h> declares them.
struct ssl_ctx_st;
struct ssl_st;

namespace ndserve {

// The HTTP listener's TLS (docs/design.md §5.1): the same --<listener>_tls_* files and
// --tls_reload_seconds as the gRPC listeners, for cpp-httplib's SSLServer. Setup()
// prepares the server's SSL_CTX; every handshake then takes the certificate, key and
// client CA this object holds, re-reading the files when the reload period has passed
// since the last read, so that new connections get a rotated pair without a restart and
// established ones keep theirs (as gRPC's FileWatcherCertificateProvider). A reload that
// fails (a half-written file, a key that does not match) keeps the previous pair and logs
// why. Thread-safe: handshakes run on many connection threads.
class HttpTls {
 public:
  // Reads and checks the files now (errors as ValidateTlsFiles, plus a key that does not
  // match the certificate). `files` must be enabled().
  static absl::StatusOr<std::unique_ptr<HttpTls>> Create(const TlsFiles& files,
                                                         int reload_seconds);
  ~HttpTls();
  HttpTls(const HttpTls&) = delete;
  HttpTls& operator=(const HttpTls&) = delete;

  // TLS 1.2 or later, no renegotiation, the per-handshake certificate callback and, with a
  // client CA, a required and verified client certificate. False if OpenSSL refused.
  bool Setup(ssl_ctx_st& ctx);

  bool mutual() const { return !files_.client_ca.empty(); }

 private:
  struct Loaded;

  HttpTls(TlsFiles files, int reload_seconds);
  // Called by OpenSSL once per handshake, before the server's certificate is sent.
  static int OnHandshake(ssl_st* ssl, void* self);
  int Use(ssl_st* ssl);

  const TlsFiles files_;
  const std::chrono::seconds reload_;
  std::mutex mu_;
  std::shared_ptr<const Loaded> loaded_;  // guarded by mu_
  std::chrono::steady_clock::time_point read_at_;  // guarded by mu_
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_HTTP_TLS_H_
