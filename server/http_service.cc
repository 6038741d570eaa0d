#include "server/http_service.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "server/host_memory_budget.h"
#include "server/http_tls.h"
#include "server/inference_service.h"
#include "server/json_codec.h"
#include "server/options.h"
#include "server/status_util.h"

namespace ndserve {
namespace {

constexpr int kDefaultThreads = 64;
constexpr char kJson[] = "application/json";
constexpr char kHeaderLength[] = "Inference-Header-Content-Length";
// A model segment of a URL; versions are checked by the handlers (ParseModelVersion).
constexpr char kModel[] = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";

void Reply(httplib::Response& res, int status, std::string body) {
  res.status = status;
  res.set_content(std::move(body), kJson);
}

void ReplyError(httplib::Response& res, const absl::Status& status) {
  Reply(res, HttpStatusFor(status.code()), ErrorJson(status.message()));
}

// grpc::Status -> the same absl::Status the gRPC client would have seen.
absl::Status Of(const grpc::Status& s) { return FromGrpcStatus(s); }

std::string Match(const httplib::Request& req, size_t i) {
  return i < req.matches.size() ? std::string(req.matches[i]) : std::string();
}

// Reads the body of a content-reader route, Content-Length or chunked, within
// --max_request_bytes. A body over the limit is still read to its end (and dropped) before
// the 413: cpp-httplib keeps the connection open after any reply, and unread body bytes
// would be parsed as the next request on it. The read timeout bounds a client that
// stalls instead.
bool ReadBody(const httplib::Request& req, httplib::Response& res,
              const httplib::ContentReader& reader, uint64_t limit, std::string* body) {
  // Neither a length nor chunks: no body (curl -X POST without -d; the repository
  // endpoints' bodies are optional).
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) return true;
  uint64_t length = 0;
  if (req.has_header("Content-Length") &&
      !absl::SimpleAtoi(req.get_header_value("Content-Length"), &length)) {
    Reply(res, 400, ErrorJson("Content-Length is not a number"));
    return false;
  }
  if (length <= limit) body->reserve(length);
  bool too_long = length > limit;
  const bool read = reader([&](const char* data, size_t n) {
    if (too_long || body->size() + n > limit) {
      too_long = true;
      body->clear();
      return true;
    }
    body->append(data, n);
    return true;
  });
  if (too_long) {
    Reply(res, 413,
          ErrorJson(absl::StrCat("the request body (",
                                 length > limit ? absl::StrCat(length, " bytes")
                                                : std::string("chunked"),
                                 ") is larger than --max_request_bytes (", limit, ")")));
    return false;
  }
  if (!read) {
    Reply(res, 400, ErrorJson("the request body could not be read in full"));
    return false;
  }
  return true;
}

// The largest piece of a held reply handed to cpp-httplib at once.
constexpr size_t kSendChunk = 1 << 20;

// Sends `body` as the reply, keeping `held` (its bytes in the host budget) until
// cpp-httplib has written the last byte or given up on the connection: a client that
// reads slowly keeps its reply inside --max_inflight_host_bytes (docs/design.md §5.1),
// as HeldReply does for gRPC.
void SendHeld(httplib::Response& res, std::string body, HostMemoryBudget::Reservation held,
              const char* content_type) {
  struct Held {
    std::string body;
    HostMemoryBudget::Reservation bytes;
  };
  auto reply = std::make_shared<Held>(Held{std::move(body), std::move(held)});
  const size_t size = reply->body.size();
  res.set_content_provider(
      size, content_type,
      [reply](size_t offset, size_t length, httplib::DataSink& sink) {
        return sink.write(reply->body.data() + offset, std::min(length, kSendChunk));
      },
      // Runs when the Response is destroyed, after the write ended.
      [reply](bool /*success*/) {
        std::string().swap(reply->body);
        reply->bytes = HostMemoryBudget::Reservation();
      });
}

}  // namespace

HttpService::HttpService(InferenceServiceImpl* service, HttpServiceOptions options)
    : service_(service), options_(std::move(options)) {}

HttpService::~HttpService() { Stop(); }

absl::Status HttpService::Start() {
  absl::StatusOr<ListenAddress> address = ParseListenAddress(options_.address, "http_address");
  if (!address.ok()) return address.status();
  if (options_.tls.enabled()) {
    absl::StatusOr<std::unique_ptr<HttpTls>> tls =
        HttpTls::Create(options_.tls, options_.tls_reload_seconds);
    if (!tls.ok()) return tls.status();
    tls_ = *std::move(tls);
    HttpTls* const setup = tls_.get();
    server_ = std::make_unique<httplib::SSLServer>(
        [setup](SSL_CTX& ctx) { return setup->Setup(ctx); });
    if (!server_->is_valid()) {
      return absl::InternalError("--http_tls_cert: OpenSSL could not set up the TLS context");
    }
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  const int threads = options_.threads > 0 ? options_.threads : kDefaultThreads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_read_timeout(options_.read_timeout_seconds, 0);
  server_->set_write_timeout(options_.read_timeout_seconds, 0);
  // Keep-alive without a request count limit (cpp-httplib closes after 5 by default):
  // load balancers and clients reuse connections for thousands of calls.
  server_->set_keep_alive_max_count(1u << 30);
  server_->set_keep_alive_timeout(options_.read_timeout_seconds);
  server_->set_payload_max_length(options_.max_request_bytes);
  server_->set_tcp_nodelay(true);
  Route();
  if (address->port == 0) {
    port_ = server_->bind_to_any_port(address->host);
  } else if (server_->bind_to_port(address->host, address->port)) {
    port_ = address->port;
  }
  if (port_ <= 0) {
    port_ = 0;
    return absl::UnavailableError(
        absl::StrCat("--http_address=", options_.address, ": cannot listen there"));
  }
  auto ended = std::make_shared<std::atomic<bool>>(false);
  listener_ = std::thread([this, ended] {
    server_->listen_after_bind();
    ended->store(true);
  });
  // stop() is a no-op until the accept loop runs; wait for it so that Stop always ends it.
  while (!server_->is_running() && !ended->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  LOG(INFO) << "HTTP/REST (KServe v2) listening on " << address->host << ":" << port_ << " ("
            << (tls_ == nullptr ? "plain text" : tls_->mutual() ? "mutual TLS" : "TLS") << ")";
  return absl::OkStatus();
}

void HttpService::Stop() {
  if (!listener_.joinable()) return;
  server_->stop();
  listener_.join();
}

void HttpService::Route() {
  httplib::Server& s = *server_;
  InferenceServiceImpl* svc = service_;
  const uint64_t limit = options_.max_request_bytes;

  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    Reply(res, 500, ErrorJson("internal error while serving the request"));
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    // Routes that answered set their own body; this covers unknown paths and requests
    // cpp-httplib refused itself (413 over the payload limit, 400 malformed).
    if (!res.body.empty()) return;
    const std::string message =
        res.status == 404 ? absl::StrCat("no such endpoint: ", req.method, " ", req.path)
                          : absl::StrCat("HTTP ", res.status);
    res.set_content(ErrorJson(message), kJson);
  });

  s.Get("/v2/health/live", [svc](const httplib::Request&, httplib::Response& res) {
    inference::ServerLiveResponse r;
    svc->ServerLive({}, &r);
    // As Triton: 200 when live or ready, 400 when not.
    Reply(res, r.live() ? 200 : 400, r.live() ? "" : ErrorJson("not live"));
  });
  s.Get("/v2/health/ready", [svc](const httplib::Request&, httplib::Response& res) {
    inference::ServerReadyResponse r;
    svc->ServerReady({}, &r);
    Reply(res, r.ready() ? 200 : 400, r.ready() ? "" : ErrorJson("not ready"));
  });
  s.Get("/v2", [svc](const httplib::Request&, httplib::Response& res) {
    inference::ServerMetadataResponse r;
    svc->ServerMetadata({}, &r);
    Reply(res, 200, ServerMetadataJson(r));
  });
  s.Get(absl::StrCat(kModel, "/ready"), [svc](const httplib::Request& req, httplib::Response& res) {
    inference::ModelReadyRequest q;
    q.set_name(Match(req, 1));
    q.set_version(Match(req, 2));
    inference::ModelReadyResponse r;
    if (absl::Status st = Of(svc->ModelReady(q, &r)); !st.ok()) return ReplyError(res, st);
    Reply(res, r.ready() ? 200 : 400, r.ready() ? "" : ErrorJson("model not ready"));
  });
  s.Get(absl::StrCat(kModel, "/config"), [svc](const httplib::Request& req, httplib::Response& res) {
    inference::ModelConfigRequest q;
    q.set_name(Match(req, 1));
    q.set_version(Match(req, 2));
    inference::ModelConfigResponse r;
    if (absl::Status st = Of(svc->ModelConfig(q, &r)); !st.ok()) return ReplyError(res, st);
    Reply(res, 200, ProtoJson(r.config()));
  });
  auto stats = [svc](const httplib::Request& req, httplib::Response& res) {
    inference::ModelStatisticsRequest q;
    q.set_name(Match(req, 1));
    q.set_version(Match(req, 2));
    inference::ModelStatisticsResponse r;
    if (absl::Status st = Of(svc->ModelStatistics(q, &r)); !st.ok()) return ReplyError(res, st);
    Reply(res, 200, ProtoJson(r));
  };
  s.Get("/v2/models/stats", stats);
  s.Get(absl::StrCat(kModel, "/stats"), stats);
  s.Get(kModel, [svc](const httplib::Request& req, httplib::Response& res) {
    inference::ModelMetadataRequest q;
    q.set_name(Match(req, 1));
    q.set_version(Match(req, 2));
    inference::ModelMetadataResponse r;
    if (absl::Status st = Of(svc->ModelMetadata(q, &r)); !st.ok()) return ReplyError(res, st);
    Reply(res, 200, ModelMetadataJson(r));
  });

  s.Post(absl::StrCat(kModel, "/infer"),
         [svc, limit](const httplib::Request& req, httplib::Response& res,
                      const httplib::ContentReader& reader) {
           std::string body;
           if (!ReadBody(req, res, reader, limit, &body)) return;
           std::optional<size_t> json_bytes;
           if (req.has_header(kHeaderLength)) {
             size_t n = 0;
             if (!absl::SimpleAtoi(req.get_header_value(kHeaderLength), &n)) {
               return ReplyError(res, absl::InvalidArgumentError(
                                          absl::StrCat(kHeaderLength, " is not a number")));
             }
             json_bytes = n;
           }
           absl::StatusOr<HttpInferRequest> parsed =
               ParseHttpInferRequest(body, json_bytes, Match(req, 1), Match(req, 2));
           if (!parsed.ok()) return ReplyError(res, parsed.status());
           body.clear();
           body.shrink_to_fit();
           inference::ModelInferResponse response;
           HostMemoryBudget::Reservation held;
           if (absl::Status st = Of(svc->ModelInfer(parsed->request, &response, &held));
               !st.ok()) {
             return ReplyError(res, st);
           }
           absl::StatusOr<HttpBody> out = WriteHttpInferResponse(response, *parsed);
           if (!out.ok()) return ReplyError(res, out.status());
           // The reply body joins the request and response messages in the budget; once
           // those are freed it alone is held, until cpp-httplib has written it.
           if (absl::Status st = held.Grow(out->body.size(), "the HTTP reply"); !st.ok()) {
             return ReplyError(res, st);
           }
           response = inference::ModelInferResponse();
           parsed->request = inference::ModelInferRequest();
           held.ShrinkTo(out->body.size());
           res.status = 200;
           if (out->json_bytes.has_value()) {
             res.set_header(kHeaderLength, std::to_string(*out->json_bytes));
             SendHeld(res, std::move(out->body), std::move(held), "application/octet-stream");
           } else {
             SendHeld(res, std::move(out->body), std::move(held), kJson);
           }
         });

  s.Post("/v2/repository/index", [svc, limit](const httplib::Request& req, httplib::Response& res,
                                              const httplib::ContentReader& reader) {
    std::string body;
    if (!ReadBody(req, res, reader, limit, &body)) return;
    absl::StatusOr<std::optional<bool>> ready = OptionalBodyBool(body, "ready");
    if (!ready.ok()) return ReplyError(res, ready.status());
    inference::RepositoryIndexRequest q;
    q.set_ready(ready->value_or(false));
    inference::RepositoryIndexResponse r;
    if (absl::Status st = Of(svc->RepositoryIndex(q, &r)); !st.ok()) return ReplyError(res, st);
    Reply(res, 200, RepositoryIndexJson(r));
  });
  s.Post(R"(/v2/repository/models/([^/]+)/(load|unload))",
         [svc, limit](const httplib::Request& req, httplib::Response& res,
                      const httplib::ContentReader& reader) {
           std::string body;
           if (!ReadBody(req, res, reader, limit, &body)) return;
           absl::StatusOr<std::optional<bool>> dependents =
               OptionalBodyBool(body, "unload_dependents");
           if (!dependents.ok()) return ReplyError(res, dependents.status());
           absl::Status st;
           if (Match(req, 2) == "load") {
             inference::RepositoryModelLoadRequest q;
             q.set_model_name(Match(req, 1));
             inference::RepositoryModelLoadResponse r;
             st = Of(svc->RepositoryModelLoad(q, &r));
           } else {
             inference::RepositoryModelUnloadRequest q;
             q.set_model_name(Match(req, 1));
             inference::RepositoryModelUnloadResponse r;
             st = Of(svc->RepositoryModelUnload(q, &r));
           }
           if (!st.ok()) return ReplyError(res, st);
           Reply(res, 200, "");
         });
}

}  // namespace ndserve
