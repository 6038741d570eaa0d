#ifndef NDSERVE_SERVER_HTTP_SERVICE_H_
#define NDSERVE_SERVER_HTTP_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "server/tls_credentials.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace ndserve {

class HttpTls;
class InferenceServiceImpl;

struct HttpServiceOptions {
  // host:port; port 0 picks a free one (port()).
  std::string address = "0.0.0.0:8000";
  // Connection threads; <= 0: 64.
  int threads = 0;
  int read_timeout_seconds = 30;
  // Largest request body (--max_request_bytes): a larger Content-Length gets 413 before
  // the body is read.
  uint64_t max_request_bytes = 256u << 20;
  // --http_tls_*: no cert, plain HTTP; a client CA, mutual TLS (server/http_tls.h).
  TlsFiles tls;
  // --tls_reload_seconds: how often handshakes re-read the TLS files; 0: read once.
  int tls_reload_seconds = 0;
};

// The KServe v2 HTTP/REST binding (docs/design.md §5.1) on cpp-httplib: health, server and
// model metadata, config, statistics, infer (JSON and the binary tensor data extension)
// and the repository extension. Every endpoint translates its body into the gRPC message
// (server/json_codec.h) and calls the same InferenceServiceImpl handler the gRPC binding
// calls, so decoding, validation, limits and metrics are shared; errors are
// {"error": "..."} with HttpStatusFor's status.
//
// Threads: cpp-httplib's pool of `threads` connection threads; a handler blocks its
// thread while the model computes. Uses `service` (not owned; it must outlive Stop).
// Start and Stop are called from one thread.
class HttpService {
 public:
  HttpService(InferenceServiceImpl* service, HttpServiceOptions options);
  ~HttpService();
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  // Binds the address and starts serving, HTTPS when options.tls is enabled; an error
  // names --http_address or the --http_tls_* flag.
  absl::Status Start();
  // Stops accepting, lets the requests being served finish, joins the threads.
  void Stop();
  // The bound port; 0 before Start.
  int port() const { return port_; }

 private:
  void Route();

  InferenceServiceImpl* const service_;
  const HttpServiceOptions options_;
  // Before server_: the SSLServer's handshakes call into it until the server is gone.
  std::unique_ptr<HttpTls> tls_;
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_HTTP_SERVICE_H_
