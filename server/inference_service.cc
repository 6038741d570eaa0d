#include "server/inference_service.h"

#include <google/protobuf/text_format.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/async_unary_call.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/logging.h"
#include "base/text.h"
#include "engine/dynamic_batcher.h"
#include "engine/engine.h"
#include "memory/pool_stats.h"
#include "server/health_service.h"
#include "server/infer_codec.h"
#include "server/model_memory_source.h"
#include "server/inference_metrics.h"
#include "server/model_lifecycle.h"
#include "server/status_util.h"

namespace ndserve {

using inference::GRPCInferenceService;

// One accepted (or awaited) call. The poller that takes its tag off the completion queue
// calls Proceed: first when a call arrived (or the queue is shutting down: ok=false),
// then once the reply has been sent. Owns itself: it deletes itself after the reply.
class InferenceServiceImpl::Call {
 public:
  Call(InferenceServiceImpl* service, grpc::ServerCompletionQueue* cq)
      : service_(service), cq_(cq) {}
  virtual ~Call() = default;

  // Asks gRPC for the next call of this RPC, with this object as its tag.
  virtual void Request() = 0;
  virtual void Proceed(bool ok) = 0;
  // A fresh, unrequested call of the same RPC on the same queue.
  virtual Call* Clone() const = 0;

 protected:
  void RequestNext() { service_->RequestNext(*this); }
  bool Shed() const { return service_->InferBacklogFull(); }
  template <typename Req>
  void RecordShed(const Req& request) {
    if constexpr (std::is_same_v<Req, inference::ModelInferRequest>) {
      service_->RecordShed(request);
    }
  }
  // Brackets a reply that another thread sends (ModelInferAsync).
  void BeginAsyncReply() { service_->BeginAsyncReply(); }
  static void EndAsyncReply(InferenceServiceImpl* service) { service->EndAsyncReply(); }
  void Accepted() { service_->CallAccepted(); }
  void Answered() { service_->CallAnswered(); }
  // Blocking handlers go to the worker pool; cheap ones run on the poller.
  void Run(bool blocking, std::function<void()> fn) {
    if (blocking) {
      service_->workers_->Submit(std::move(fn));
    } else {
      fn();
    }
  }

  InferenceServiceImpl* const service_;
  grpc::ServerCompletionQueue* const cq_;
};

namespace {

using AsyncService = GRPCInferenceService::AsyncService;

// Triton's "priority" request parameter (uint64, or a non-negative int64) into `out`.
absl::Status ReadPriority(const inference::ModelInferRequest& request,
                          engine::InferenceRequest* out) {
  const auto it = request.parameters().find("priority");
  if (it == request.parameters().end()) return absl::OkStatus();
  const inference::InferParameter& p = it->second;
  if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) {
    out->priority = p.uint64_param();
  } else if (p.parameter_choice_case() == inference::InferParameter::kInt64Param &&
             p.int64_param() >= 0) {
    out->priority = static_cast<uint64_t>(p.int64_param());
  } else {
    return absl::InvalidArgumentError(
        "parameter 'priority' must be a non-negative integer (uint64 or int64)");
  }
  return absl::OkStatus();
}

// The call's gRPC deadline; InfiniteFuture when the client set none.
absl::Time DeadlineOf(const grpc::ServerContext& context) {
  const std::chrono::system_clock::time_point deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

template <typename Req, typename Resp>
class UnaryCall final : public InferenceServiceImpl::Call {
 public:
  using RequestFn = void (AsyncService::*)(grpc::ServerContext*, Req*,
                                           grpc::ServerAsyncResponseWriter<Resp>*,
                                           grpc::CompletionQueue*, grpc::ServerCompletionQueue*,
                                           void*);
  using HandlerFn = grpc::Status (InferenceServiceImpl::*)(const Req&, Resp*);
  using AsyncHandlerFn = void (InferenceServiceImpl::*)(const Req&, Resp*, absl::Time,
                                                        InferenceServiceImpl::HeldReply);
  // How to request and answer one RPC: with `handler`, or with `async_handler` when set.
  struct Method {
    RequestFn request;
    HandlerFn handler;
    bool blocking;
    AsyncHandlerFn async_handler = nullptr;
  };

  UnaryCall(InferenceServiceImpl* service, AsyncService* async, grpc::ServerCompletionQueue* cq,
            const Method* method)
      : Call(service, cq), async_(async), method_(method), responder_(&context_) {}

  void Request() override {
    (async_->*method_->request)(&context_, &request_, &responder_, cq_, cq_, this);
  }

  Call* Clone() const override { return new UnaryCall(service_, async_, cq_, method_); }

  void Proceed(bool ok) override {
    if (finishing_ || !ok) {
      // Reply sent (or not: the client went away), or the queue is shutting down.
      if (finishing_) Answered();
      delete this;
      return;
    }
    Accepted();
    RequestNext();
    finishing_ = true;
    if (method_->async_handler != nullptr) {
      if (Shed()) {
        // Answered here on the poller: overload costs the client one round trip.
        RecordShed(request_);
        responder_.FinishWithError(
            grpc::Status(grpc::StatusCode::UNAVAILABLE,
                         "the server is overloaded (too many requests waiting); retry later"),
            this);
        return;
      }
      BeginAsyncReply();
      Run(method_->blocking, [this, service = service_, handler = method_->async_handler] {
        (service->*handler)(request_, &response_, DeadlineOf(context_),
                            [this, service](grpc::Status status,
                                            HostMemoryBudget::Reservation until_sent) {
                              // Released when this call is deleted, after gRPC reported
                              // the response sent (or the client gone).
                              until_sent_ = std::move(until_sent);
                              // The poller may delete this object as soon as Finish is queued.
                              responder_.Finish(response_, status, this);
                              EndAsyncReply(service);
                            });
      });
      return;
    }
    Run(method_->blocking, [this, service = service_, handler = method_->handler] {
      const grpc::Status status = (service->*handler)(request_, &response_);
      // The poller may delete this object as soon as Finish is queued.
      responder_.Finish(response_, status, this);
    });
  }

 private:
  AsyncService* const async_;
  const Method* const method_;
  grpc::ServerContext context_;
  Req request_;
  Resp response_;
  grpc::ServerAsyncResponseWriter<Resp> responder_;
  HostMemoryBudget::Reservation until_sent_;  // an async handler's response bytes
  bool finishing_ = false;
};

// The RPCs, each with its handler and where it runs.
template <typename Req, typename Resp>
const typename UnaryCall<Req, Resp>::Method* MethodOf(
    typename UnaryCall<Req, Resp>::RequestFn request,
    typename UnaryCall<Req, Resp>::HandlerFn handler, bool blocking,
    typename UnaryCall<Req, Resp>::AsyncHandlerFn async_handler = nullptr) {
  // A process-lifetime constant (held by a function-local static in RequestAll), so that
  // calls may point at it without caring about destruction order.
  return new typename UnaryCall<Req, Resp>::Method{request, handler, blocking, async_handler};
}

template <typename Req, typename Resp>
void Spawn(InferenceServiceImpl* service, AsyncService* async, grpc::ServerCompletionQueue* cq,
           const typename UnaryCall<Req, Resp>::Method* method) {
  (new UnaryCall<Req, Resp>(service, async, cq, method))->Request();
}

constexpr int kInferSlotsPerQueue = 64;
constexpr bool kBlocking = true;
constexpr bool kInline = false;

constexpr absl::string_view kCutMessage =
    "ndserved is shutting down: the request was cut at the exit timeout (--exit_timeout_seconds)";

// What a request still queued or computing when the exit timeout passes is answered:
// UNAVAILABLE, as for any refused call of a server going away, so clients may retry
// elsewhere.
absl::Status CutByExitTimeout() { return absl::UnavailableError(kCutMessage); }

grpc::Status Unavailable(absl::string_view message) {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(message));
}

// Also refuses a model name no model can have (too long, not UTF-8) before it reaches the
// engine, the logs or an error message.
absl::StatusOr<int64_t> VersionOf(absl::string_view model, absl::string_view version) {
  if (absl::Status s = CheckName("model name", model); !s.ok()) return s;
  absl::StatusOr<int64_t> v = ParseModelVersion(version);
  if (!v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model, "': ", v.status().message()));
  }
  return v;
}

void FillDuration(uint64_t count, uint64_t ns, inference::StatisticDuration* out) {
  out->set_count(count);
  out->set_ns(ns);
}

void FillTensorMetadata(const engine::TensorSpec& spec,
                        inference::ModelMetadataResponse::TensorMetadata* out) {
  // Tensor names come from the model file, which may hold any bytes.
  out->set_name(SafeUtf8(spec.name));
  out->set_datatype(std::string(DTypeName(spec.dtype)));
  out->mutable_shape()->Add(spec.dims.begin(), spec.dims.end());
}

}  // namespace

InferenceServiceImpl::InferenceServiceImpl(engine::Engine* engine, ModelLifecycle* lifecycle,
                                           HealthState* health, InferenceMetrics* metrics,
                                           InferenceServiceOptions options)
    : engine_(engine),
      lifecycle_(lifecycle),
      health_(health),
      metrics_(metrics),
      options_(std::move(options)),
      host_memory_(options_.max_inflight_host_bytes, metrics_->host_request_bytes()) {}

InferenceServiceImpl::~InferenceServiceImpl() {
  Stop();
  // Registered but never started (the daemon failed to start): the queues still need
  // their shutdown and drain.
  for (auto& cq : cqs_) {
    cq->Shutdown();
    void* tag;
    bool ok;
    while (cq->Next(&tag, &ok)) delete static_cast<Call*>(tag);
  }
}

const std::vector<std::string>& InferenceServiceImpl::Extensions() {
  static const auto* const kExtensions =
      new std::vector<std::string>{"model_repository", "statistics", "model_configuration"};
  return *kExtensions;
}

void InferenceServiceImpl::Register(grpc::ServerBuilder& builder) {
  builder.RegisterService(&service_);
  int queues = options_.completion_queues;
  if (queues <= 0) {
    queues = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / 2);
  }
  for (int i = 0; i < queues; ++i) cqs_.push_back(builder.AddCompletionQueue());
}

void InferenceServiceImpl::Start(grpc::Server& /*server*/) {
  workers_ = std::make_unique<WorkerPool>(options_.workers, options_.worker_spin_micros);
  for (auto& cq : cqs_) RequestAll(cq.get());
  for (auto& cq : cqs_) {
    grpc::ServerCompletionQueue* q = cq.get();
    pollers_.emplace_back([this, q] { Poll(q); });
  }
  started_ = true;
  LOG(INFO) << "inference service: " << cqs_.size() << " completion queue"
            << (cqs_.size() == 1 ? "" : "s") << ", " << workers_->size() << " workers, model "
            << "control " << ModelControlModeName(options_.model_control_mode);
}

void InferenceServiceImpl::Stop() {
  if (!started_) return;
  started_ = false;
  {
    absl::MutexLock lock(&request_mu_);
    stopping_ = true;
  }
  // The server has shut down: no call arrives any more. Finish those accepted, whose
  // replies land on the queues the pollers still drain; calls queued in a model's
  // batcher answer from its threads, and the queues must outlive those replies.
  workers_->Shutdown();
  {
    absl::MutexLock lock(&async_mu_);
    async_mu_.Await(absl::Condition(
        +[](int* pending) { return *pending == 0; }, &async_replies_));
  }
  for (auto& cq : cqs_) cq->Shutdown();
  for (std::thread& t : pollers_) t.join();
  pollers_.clear();
  cqs_.clear();
  if (const int64_t cut = cut_requests_.load(); cut > 0) {
    LOG(WARNING) << cut << " inference request" << (cut == 1 ? " was" : "s were")
                 << " cut by the exit timeout: answered UNAVAILABLE and counted as failed";
  }
}

void InferenceServiceImpl::CallAccepted() {
  absl::MutexLock lock(&calls_mu_);
  ++unanswered_calls_;
}

void InferenceServiceImpl::CallAnswered() {
  absl::MutexLock lock(&calls_mu_);
  --unanswered_calls_;
}

bool InferenceServiceImpl::AwaitCallsAnswered(absl::Time deadline) {
  absl::MutexLock lock(&calls_mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(calls_mu_) { return unanswered_calls_ == 0; };
  return calls_mu_.AwaitWithDeadline(absl::Condition(&none), deadline);
}

int InferenceServiceImpl::CutCallsInFlight() {
  cut_.store(true);
  absl::MutexLock lock(&calls_mu_);
  return static_cast<int>(unanswered_calls_);
}

void InferenceServiceImpl::RequestAll(grpc::ServerCompletionQueue* cq) {
  using namespace inference;  // NOLINT: the message names below are all inference::
  static const auto* live = MethodOf<ServerLiveRequest, ServerLiveResponse>(
      &AsyncService::RequestServerLive, &InferenceServiceImpl::ServerLive, kInline);
  static const auto* ready = MethodOf<ServerReadyRequest, ServerReadyResponse>(
      &AsyncService::RequestServerReady, &InferenceServiceImpl::ServerReady, kInline);
  static const auto* model_ready = MethodOf<ModelReadyRequest, ModelReadyResponse>(
      &AsyncService::RequestModelReady, &InferenceServiceImpl::ModelReady, kInline);
  static const auto* server_md = MethodOf<ServerMetadataRequest, ServerMetadataResponse>(
      &AsyncService::RequestServerMetadata, &InferenceServiceImpl::ServerMetadata, kInline);
  static const auto* model_md = MethodOf<ModelMetadataRequest, ModelMetadataResponse>(
      &AsyncService::RequestModelMetadata, &InferenceServiceImpl::ModelMetadata, kInline);
  static const auto* config = MethodOf<ModelConfigRequest, ModelConfigResponse>(
      &AsyncService::RequestModelConfig, &InferenceServiceImpl::ModelConfig, kInline);
  static const auto* infer = MethodOf<ModelInferRequest, ModelInferResponse>(
      &AsyncService::RequestModelInfer, &InferenceServiceImpl::ModelInfer, kBlocking,
      static_cast<void (InferenceServiceImpl::*)(const ModelInferRequest&, ModelInferResponse*,
                                                 absl::Time, HeldReply)>(
          &InferenceServiceImpl::ModelInferAsync));
  static const auto* stats = MethodOf<ModelStatisticsRequest, ModelStatisticsResponse>(
      &AsyncService::RequestModelStatistics, &InferenceServiceImpl::ModelStatistics, kInline);
  static const auto* index = MethodOf<RepositoryIndexRequest, RepositoryIndexResponse>(
      &AsyncService::RequestRepositoryIndex, &InferenceServiceImpl::RepositoryIndex, kInline);
  static const auto* load = MethodOf<RepositoryModelLoadRequest, RepositoryModelLoadResponse>(
      &AsyncService::RequestRepositoryModelLoad, &InferenceServiceImpl::RepositoryModelLoad,
      kBlocking);
  static const auto* unload = MethodOf<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse>(
      &AsyncService::RequestRepositoryModelUnload, &InferenceServiceImpl::RepositoryModelUnload,
      kBlocking);
  Spawn<ServerLiveRequest, ServerLiveResponse>(this, &service_, cq, live);
  Spawn<ServerReadyRequest, ServerReadyResponse>(this, &service_, cq, ready);
  Spawn<ModelReadyRequest, ModelReadyResponse>(this, &service_, cq, model_ready);
  Spawn<ServerMetadataRequest, ServerMetadataResponse>(this, &service_, cq, server_md);
  Spawn<ModelMetadataRequest, ModelMetadataResponse>(this, &service_, cq, model_md);
  Spawn<ModelConfigRequest, ModelConfigResponse>(this, &service_, cq, config);
  // Many ModelInfer calls waiting per queue. A call that arrives while none waits stays
  // unmatched inside gRPC, and a shutdown cancels unmatched calls instead of draining them;
  // with this many, every client of a busy daemon is accepted (and then queued for a
  // worker), so the drain finishes it.
  for (int i = 0; i < kInferSlotsPerQueue; ++i) {
    Spawn<ModelInferRequest, ModelInferResponse>(this, &service_, cq, infer);
  }
  Spawn<ModelStatisticsRequest, ModelStatisticsResponse>(this, &service_, cq, stats);
  Spawn<RepositoryIndexRequest, RepositoryIndexResponse>(this, &service_, cq, index);
  Spawn<RepositoryModelLoadRequest, RepositoryModelLoadResponse>(this, &service_, cq, load);
  Spawn<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse>(this, &service_, cq, unload);
}

void InferenceServiceImpl::RequestNext(const Call& done) {
  absl::ReaderMutexLock lock(&request_mu_);
  if (stopping_) return;
  done.Clone()->Request();
}

bool InferenceServiceImpl::InferBacklogFull() const {
  return options_.max_pending_infer > 0 &&
         workers_->backlog() >= static_cast<size_t>(options_.max_pending_infer);
}

void InferenceServiceImpl::RecordShed(const inference::ModelInferRequest& request) {
  InferenceMetrics::Request record;
  record.model = request.model_name();
  record.version = request.model_version();
  record.code = absl::StatusCode::kUnavailable;
  record.rejected_reason = kRejectServerBusy;
  metrics_->RecordRequest(record);
}

void InferenceServiceImpl::BeginAsyncReply() {
  absl::MutexLock lock(&async_mu_);
  ++async_replies_;
}

void InferenceServiceImpl::EndAsyncReply() {
  absl::MutexLock lock(&async_mu_);
  --async_replies_;
}

void InferenceServiceImpl::Poll(grpc::ServerCompletionQueue* cq) {
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) static_cast<Call*>(tag)->Proceed(ok);
}

// ---- Handlers ----------------------------------------------------------------------

grpc::Status InferenceServiceImpl::ServerLive(const inference::ServerLiveRequest&,
                                              inference::ServerLiveResponse* response) {
  response->set_live(health_->live());
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::ServerReady(const inference::ServerReadyRequest&,
                                               inference::ServerReadyResponse* response) {
  // Strict, as Triton's default: a model that failed to load keeps the server not ready
  // (grpc.health readiness, by contrast, turns SERVING once the start-up load is over).
  response->set_ready(health_->ready() && engine_->AllModelsReady());
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::ModelReady(const inference::ModelReadyRequest& request,
                                              inference::ModelReadyResponse* response) {
  absl::StatusOr<int64_t> version = VersionOf(request.name(), request.version());
  if (!version.ok()) return ToGrpcStatus(version.status());
  response->set_ready(engine_->IsModelReady(request.name(), *version));
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::ServerMetadata(const inference::ServerMetadataRequest&,
                                                  inference::ServerMetadataResponse* response) {
  response->set_name("ndserve");
  response->set_version(options_.server_version);
  for (const std::string& e : Extensions()) response->add_extensions(e);
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::ModelMetadata(const inference::ModelMetadataRequest& request,
                                                 inference::ModelMetadataResponse* response) {
  absl::StatusOr<int64_t> version = VersionOf(request.name(), request.version());
  if (!version.ok()) return ToGrpcStatus(version.status());
  absl::StatusOr<engine::ModelMetadata> md = engine_->GetModelMetadata(request.name(), *version);
  if (!md.ok()) return ToGrpcStatus(md.status());
  response->set_name(md->name);
  for (int64_t v : md->versions) response->add_versions(absl::StrCat(v));
  response->set_platform(md->platform);
  for (const engine::TensorSpec& s : md->inputs) FillTensorMetadata(s, response->add_inputs());
  for (const engine::TensorSpec& s : md->outputs) FillTensorMetadata(s, response->add_outputs());
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::ModelConfig(const inference::ModelConfigRequest& request,
                                               inference::ModelConfigResponse* response) {
  absl::StatusOr<int64_t> version = VersionOf(request.name(), request.version());
  if (!version.ok()) return ToGrpcStatus(version.status());
  absl::StatusOr<engine::ModelConfig> config = engine_->GetModelConfig(request.name(), *version);
  if (!config.ok()) return ToGrpcStatus(config.status());
  // The engine speaks config.pbtxt; its text is the proto's text format by definition.
  const std::string text = engine::ModelConfigToText(*config);
  if (!google::protobuf::TextFormat::ParseFromString(text, response->mutable_config())) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat("model '", request.name(), "': cannot encode its config"));
  }
  return grpc::Status::OK;
}

void InferenceServiceImpl::ModelInferAsync(const inference::ModelInferRequest& request,
                                           inference::ModelInferResponse* response,
                                           absl::Time deadline, Reply done) {
  ModelInferAsync(request, response, deadline,
                  HeldReply([done = std::move(done)](
                                grpc::Status status, HostMemoryBudget::Reservation held) mutable {
                    // A by-value parameter dies only after the call returns (the caller
                    // destroys it), so release it here, before answering.
                    { HostMemoryBudget::Reservation released = std::move(held); }
                    done(std::move(status));
                  }));
}

void InferenceServiceImpl::ModelInferAsync(const inference::ModelInferRequest& request,
                                           inference::ModelInferResponse* response,
                                           absl::Time deadline, HeldReply done) {
  const absl::Time start = absl::Now();
  InferenceMetrics::InflightScope inflight = metrics_->TrackInflight(request.model_name());
  // Records the call's metrics and answers it; the last use of `request` and `response`.
  auto finish = [this, &request, response, start](
                    absl::Status status, const engine::InferenceResponse* result) -> grpc::Status {
    InferenceMetrics::Request record;
    record.model = request.model_name();
    record.version = request.model_version();
    if (result != nullptr) {
      EncodeInferResponse(*result, response);
      if (response->id().empty()) response->set_id(request.id());
      record.version = response->model_version();
      const engine::InferenceTimings& t = result->timings;
      record.queue_seconds = static_cast<double>(t.queue_ns) * 1e-9;
      record.compute_seconds =
          static_cast<double>(t.compute_input_ns + t.compute_infer_ns + t.compute_output_ns) * 1e-9;
      record.context_peak_bytes = t.context_peak_bytes;
    }
    record.code = status.code();
    record.rejected_reason = engine::RejectReason(status);
    record.total_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    metrics_->RecordRequest(record);
    return ToGrpcStatus(status);
  };
  if (start >= deadline) {
    // The client gave up while the call waited for a worker.
    return done(finish(engine::WithRejectReason(
                           absl::DeadlineExceededError(
                               "the request's deadline passed before it was served; it did not run"),
                           engine::kRejectDeadline),
                       nullptr),
                {});
  }
  // Host memory this request holds until it is answered (HostMemoryBudget): the wire
  // request gRPC parsed, the decoder's copies, then the response.
  absl::StatusOr<HostMemoryBudget::Reservation> held =
      host_memory_.Reserve(request.ByteSizeLong(), "the request");
  if (!held.ok()) return done(finish(held.status(), nullptr), {});
  absl::StatusOr<DecodedInferRequest> decoded = DecodeInferRequest(request);
  if (!decoded.ok()) return done(finish(decoded.status(), nullptr), {});
  if (absl::Status grown = held->Grow(decoded->owned_bytes(), "the decoded request");
      !grown.ok()) {
    return done(finish(grown, nullptr), {});
  }
  if (cut_.load()) {
    // Queued behind the workers when the exit timeout passed: never runs.
    cut_requests_.fetch_add(1);
    return done(finish(CutByExitTimeout(), nullptr), {});
  }
  engine::InferenceRequest& engine_request = decoded->mutable_request();
  engine_request.deadline = deadline;
  engine_request.cancel = &cut_;
  if (auto timeout = request.parameters().find("timeout"); timeout != request.parameters().end()) {
    // Triton's per-request queue timeout; the model's queue policy decides whether it counts.
    if (timeout->second.parameter_choice_case() != inference::InferParameter::kInt64Param ||
        timeout->second.int64_param() < 0) {
      return done(finish(absl::InvalidArgumentError(
                             "parameter 'timeout' must be a non-negative int64 (microseconds)"),
                         nullptr),
                  {});
    }
    engine_request.timeout_microseconds = static_cast<uint64_t>(timeout->second.int64_param());
  }
  if (absl::Status priority = ReadPriority(request, &engine_request); !priority.ok()) {
    return done(finish(std::move(priority), nullptr), {});
  }
  // The decoded request views `request`'s bytes and must live until the engine answers.
  auto owned = std::make_unique<DecodedInferRequest>(*std::move(decoded));
  const engine::InferenceRequest& infer = owned->request();
  // Answers arriving after InferAsync returned come from a batcher lane; their encoding
  // and reply go to the worker pool, so that the lane goes straight back to running
  // batches instead of serializing every member's response.
  auto submitting = std::make_shared<std::atomic<bool>>(true);
  engine_->InferAsync(infer, [this, submitting, finish, owned = std::move(owned),
                              held = *std::move(held), inflight = std::move(inflight),
                              done = std::move(done)](
                                 absl::StatusOr<engine::InferenceResponse> result) mutable {
    auto reply = [this, finish, owned = std::move(owned), held = std::move(held),
                  inflight = std::move(inflight), done = std::move(done),
                  result = std::move(result)]() mutable {
      if (!result.ok() && result.status().code() == absl::StatusCode::kCancelled && cut_.load()) {
        // Stopped at a graph node by the exit timeout (CutCallsInFlight).
        cut_requests_.fetch_add(1);
        result = CutByExitTimeout();
      }
      absl::Status status = result.ok() ? ReserveResponse(*result, &held) : result.status();
      grpc::Status answer =
          status.ok() ? finish(status, &*result) : finish(std::move(status), nullptr);
      owned.reset();
      { InferenceMetrics::InflightScope ended = std::move(inflight); }
      // The response's bytes stay held until the transport has sent them.
      done(std::move(answer), std::move(held));
    };
    if (submitting->load(std::memory_order_acquire) || workers_ == nullptr) {
      reply();
    } else {
      workers_->Submit(std::move(reply));
    }
  });
  submitting->store(false, std::memory_order_release);
}

grpc::Status InferenceServiceImpl::ModelInfer(const inference::ModelInferRequest& request,
                                              inference::ModelInferResponse* response) {
  HostMemoryBudget::Reservation released_on_return;
  return ModelInfer(request, response, &released_on_return);
}

grpc::Status InferenceServiceImpl::ModelInfer(const inference::ModelInferRequest& request,
                                              inference::ModelInferResponse* response,
                                              HostMemoryBudget::Reservation* until_sent) {
  struct Waiter {
    absl::Mutex mu;
    std::optional<grpc::Status> status ABSL_GUARDED_BY(mu);
    HostMemoryBudget::Reservation held ABSL_GUARDED_BY(mu);
  };
  auto waiter = std::make_shared<Waiter>();
  ModelInferAsync(request, response, absl::InfiniteFuture(),
                  HeldReply([waiter](grpc::Status status, HostMemoryBudget::Reservation held) {
                    absl::MutexLock lock(&waiter->mu);
                    waiter->held = std::move(held);
                    waiter->status = std::move(status);
                  }));
  absl::MutexLock lock(&waiter->mu);
  waiter->mu.Await(absl::Condition(
      +[](std::optional<grpc::Status>* s) { return s->has_value(); }, &waiter->status));
  *until_sent = std::move(waiter->held);
  return *waiter->status;
}

absl::Status InferenceServiceImpl::ReserveResponse(const engine::InferenceResponse& result,
                                                   HostMemoryBudget::Reservation* held) const {
  const size_t bytes = EncodedResponseBytes(result);
  if (options_.max_response_bytes > 0 && bytes > options_.max_response_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model '", result.model_name, "': the response would hold ", FormatBytes(bytes),
        ", more than --max_response_bytes (", FormatBytes(options_.max_response_bytes), ")"));
  }
  return held->Grow(bytes, "the response");
}

grpc::Status InferenceServiceImpl::ModelStatistics(const inference::ModelStatisticsRequest& request,
                                                   inference::ModelStatisticsResponse* response) {
  absl::StatusOr<int64_t> version = VersionOf(request.name(), request.version());
  if (!version.ok()) return ToGrpcStatus(version.status());
  absl::StatusOr<std::vector<engine::ModelStatsSnapshot>> stats =
      engine_->GetStatistics(request.name(), *version);
  if (!stats.ok()) return ToGrpcStatus(stats.status());
  for (const engine::ModelStatsSnapshot& s : *stats) {
    inference::ModelStatistics* out = response->add_model_stats();
    out->set_name(s.name);
    out->set_version(absl::StrCat(s.version));
    out->set_last_inference(s.last_inference_ms);
    out->set_inference_count(s.inference_count);
    out->set_execution_count(s.execution_count);
    inference::InferStatistics* is = out->mutable_inference_stats();
    FillDuration(s.success_count, s.success_ns, is->mutable_success());
    FillDuration(s.fail_count, s.fail_ns, is->mutable_fail());
    // As Triton: the per-phase counts are those of successful requests.
    FillDuration(s.success_count, s.queue_ns, is->mutable_queue());
    FillDuration(s.success_count, s.compute_input_ns, is->mutable_compute_input());
    FillDuration(s.success_count, s.compute_infer_ns, is->mutable_compute_infer());
    FillDuration(s.success_count, s.compute_output_ns, is->mutable_compute_output());
    // Exact, from the version's manager tree (docs/design.md §2), where Triton estimates.
    if (auto served = engine_->GetModel(s.name, s.version); served.ok()) {
      FillMemoryUsage((*served)->MemoryUsage(), out->mutable_memory_usage());
    }
  }
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::RepositoryIndex(const inference::RepositoryIndexRequest& request,
                                                   inference::RepositoryIndexResponse* response) {
  for (const engine::ModelIndexEntry& row : engine_->RepositoryIndex(request.ready())) {
    inference::RepositoryIndexResponse::ModelIndex* out = response->add_models();
    // Directory names and load errors (which quote config.pbtxt) may hold any bytes; one
    // that is not UTF-8 would make the whole reply undecodable for every client.
    out->set_name(SafeUtf8(row.name));
    if (row.version > 0) out->set_version(absl::StrCat(row.version));
    out->set_state(std::string(engine::ModelStateName(row.state)));
    out->set_reason(SafeUtf8(row.reason));
  }
  return grpc::Status::OK;
}

grpc::Status InferenceServiceImpl::RepositoryModelLoad(
    const inference::RepositoryModelLoadRequest& request, inference::RepositoryModelLoadResponse*) {
  if (options_.model_control_mode == ModelControlMode::kNone) {
    return Unavailable("explicit model load / unload is not allowed (--model_control_mode=none)");
  }
  if (request.model_name().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "RepositoryModelLoad: no model_name");
  }
  if (absl::Status s = CheckName("model name", request.model_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (!request.parameters().empty()) {
    // Triton's config and file overrides would bypass the repository; not supported.
    return grpc::Status(
        grpc::StatusCode::UNIMPLEMENTED,
        absl::StrCat("model '", request.model_name(), "': load parameters ('",
                     ClipName(request.parameters().begin()->first), "') are not supported"));
  }
  return ToGrpcStatus(lifecycle_->Load(request.model_name()));
}

grpc::Status InferenceServiceImpl::RepositoryModelUnload(
    const inference::RepositoryModelUnloadRequest& request,
    inference::RepositoryModelUnloadResponse*) {
  if (options_.model_control_mode == ModelControlMode::kNone) {
    return Unavailable("explicit model load / unload is not allowed (--model_control_mode=none)");
  }
  if (request.model_name().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "RepositoryModelUnload: no model_name");
  }
  if (absl::Status s = CheckName("model name", request.model_name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  for (const auto& [key, value] : request.parameters()) {
    // Models have no dependents here, so Triton's one unload parameter changes nothing.
    if (key != "unload_dependents") {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          absl::StrCat("model '", request.model_name(), "': unload parameter '",
                                       ClipName(key), "' is not supported"));
    }
  }
  return ToGrpcStatus(lifecycle_->Unload(request.model_name()));
}

}  // namespace ndserve
