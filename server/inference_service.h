#ifndef NDSERVE_SERVER_INFERENCE_SERVICE_H_
#define NDSERVE_SERVER_INFERENCE_SERVICE_H_

#include <grpcpp/completion_queue.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/inference.grpc.pb.h"
#include "server/daemon.h"
#include "server/host_memory_budget.h"
#include "server/options.h"
#include "server/worker_pool.h"

namespace ndserve {

namespace engine {
class Engine;
struct InferenceResponse;
}  // namespace engine
class HealthState;
class InferenceMetrics;
class ModelLifecycle;

struct InferenceServiceOptions {
  // ServerMetadata's version.
  std::string server_version = "dev";
  ModelControlMode model_control_mode = ModelControlMode::kExplicit;
  // Threads polling completion queues (one queue each); <= 0: half the cores, at least 1.
  int completion_queues = 0;
  // Threads running ModelInfer and the repository RPCs; <= 0: one per core.
  int workers = 0;
  // How long an idle worker watches for the next call before it sleeps (WorkerPool).
  int worker_spin_micros = 0;
  // Host-memory bounds (server/options.h HostBounds); 0: no limit.
  uint64_t max_response_bytes = 0;
  uint64_t max_inflight_host_bytes = 0;
  // ModelInfer calls waiting for a worker beyond this many are refused on the polling
  // thread with UNAVAILABLE, so that an overloaded daemon answers at once instead of
  // queueing without bound; 0: no limit.
  int max_pending_infer = 0;
};

// inference.GRPCInferenceService (KServe v2 + Triton's repository, statistics and model
// configuration extensions) over the engine, as an async gRPC service.
//
// Threads: each completion queue has one polling thread that accepts calls and answers
// the cheap RPCs (liveness, readiness, metadata, config, index, statistics) itself; the
// blocking ones (ModelInfer, RepositoryModelLoad/Unload) go to a WorkerPool sized to the
// machine, so a slow model never stops the daemon from answering health checks.
//
// Shutdown (docs/design.md §5): the daemon waits for the accepted calls to be answered;
// at the exit timeout CutCallsInFlight answers the ModelInfer calls still queued at once
// and stops those computing at their next graph node, all with UNAVAILABLE.
//
// Handlers are thin: decode (server/infer_codec.h) -> call the engine -> map the status
// (ToGrpcStatus) -> record InferenceMetrics. They are public and gRPC-server-free so
// that tests can call them directly.
//
// Uses `engine`, `health`, `metrics` and `lifecycle` (not owned; all must outlive the
// service); owns the HostMemoryBudget that bounds ModelInfer's host bytes
// (max_inflight_host_bytes) and moves `metrics`' ndserve_host_request_bytes gauge. The
// daemon drives Register/Start/Stop from one thread (PortService); the handlers are
// thread-safe.
class InferenceServiceImpl final : public PortService {
 public:
  InferenceServiceImpl(engine::Engine* engine, ModelLifecycle* lifecycle, HealthState* health,
                       InferenceMetrics* metrics, InferenceServiceOptions options);
  ~InferenceServiceImpl() override;
  InferenceServiceImpl(const InferenceServiceImpl&) = delete;
  InferenceServiceImpl& operator=(const InferenceServiceImpl&) = delete;

  // PortService.
  void Register(grpc::ServerBuilder& builder) override;
  void Start(grpc::Server& server) override;
  void Stop() override;
  bool AwaitCallsAnswered(absl::Time deadline) override;
  int CutCallsInFlight() override;

  // The extensions ServerMetadata lists.
  static const std::vector<std::string>& Extensions();

  grpc::Status ServerLive(const inference::ServerLiveRequest& request,
                          inference::ServerLiveResponse* response);
  grpc::Status ServerReady(const inference::ServerReadyRequest& request,
                           inference::ServerReadyResponse* response);
  grpc::Status ModelReady(const inference::ModelReadyRequest& request,
                          inference::ModelReadyResponse* response);
  grpc::Status ServerMetadata(const inference::ServerMetadataRequest& request,
                              inference::ServerMetadataResponse* response);
  grpc::Status ModelMetadata(const inference::ModelMetadataRequest& request,
                             inference::ModelMetadataResponse* response);
  grpc::Status ModelConfig(const inference::ModelConfigRequest& request,
                           inference::ModelConfigResponse* response);
  // Answers one finished ModelInfer call; may run on any thread.
  using Reply = absl::AnyInvocable<void(grpc::Status)>;
  // As Reply, with the host memory the request and its response still hold
  // (HostMemoryBudget): the caller keeps `until_sent` until the transport has sent the
  // response, so that a slow reader's response stays inside --max_inflight_host_bytes.
  using HeldReply =
      absl::AnyInvocable<void(grpc::Status, HostMemoryBudget::Reservation until_sent)>;
  // ModelInfer without holding the calling thread while the request waits in a model's
  // queue: `done` is called exactly once, on this thread or later on a dynamic
  // batcher's thread (docs/design.md §6). `request` and `response` must stay valid until
  // then. A request still queued at `deadline` (the call's gRPC deadline) never runs.
  // This overload releases the host memory before `done`.
  void ModelInferAsync(const inference::ModelInferRequest& request,
                       inference::ModelInferResponse* response, absl::Time deadline,
                       Reply done);
  void ModelInferAsync(const inference::ModelInferRequest& request,
                       inference::ModelInferResponse* response, absl::Time deadline,
                       HeldReply done);
  // Host bytes that requests and responses hold now (ndserve_host_request_bytes).
  uint64_t host_bytes_in_use() const { return host_memory_.in_use(); }
  // ModelInferAsync without a deadline, waiting for its result.
  grpc::Status ModelInfer(const inference::ModelInferRequest& request,
                          inference::ModelInferResponse* response);
  // As above, handing the host bytes the request and its response hold to `until_sent`
  // (as HeldReply), for a binding that writes the reply itself (HTTP/REST).
  grpc::Status ModelInfer(const inference::ModelInferRequest& request,
                          inference::ModelInferResponse* response,
                          HostMemoryBudget::Reservation* until_sent);
  grpc::Status ModelStatistics(const inference::ModelStatisticsRequest& request,
                               inference::ModelStatisticsResponse* response);
  grpc::Status RepositoryIndex(const inference::RepositoryIndexRequest& request,
                               inference::RepositoryIndexResponse* response);
  grpc::Status RepositoryModelLoad(const inference::RepositoryModelLoadRequest& request,
                                   inference::RepositoryModelLoadResponse* response);
  grpc::Status RepositoryModelUnload(const inference::RepositoryModelUnloadRequest& request,
                                     inference::RepositoryModelUnloadResponse* response);

  // Internal: one accepted call's state machine (defined in the .cc).
  class Call;

 private:
  // Asks gRPC for the next call of every RPC on `cq`.
  void RequestAll(grpc::ServerCompletionQueue* cq);
  // Asks for the next call like `done` on its queue, unless the service is stopping.
  void RequestNext(const Call& done);
  // Whether a new ModelInfer call must be refused: too many wait for a worker.
  bool InferBacklogFull() const;
  // The metrics of a ModelInfer call refused before it was decoded.
  void RecordShed(const inference::ModelInferRequest& request);
  // Counts calls whose reply an engine thread will send; Stop waits for them before it
  // shuts the completion queues down.
  void BeginAsyncReply();
  void EndAsyncReply();
  void Poll(grpc::ServerCompletionQueue* cq);
  // A call was accepted / its reply is out (or its client is gone).
  void CallAccepted() ABSL_LOCKS_EXCLUDED(calls_mu_);
  void CallAnswered() ABSL_LOCKS_EXCLUDED(calls_mu_);

  // Checks --max_response_bytes and holds the response's bytes in `held` before
  // ModelInfer builds it.
  absl::Status ReserveResponse(const engine::InferenceResponse& result,
                               HostMemoryBudget::Reservation* held) const;

  engine::Engine* const engine_;
  ModelLifecycle* const lifecycle_;
  HealthState* const health_;
  InferenceMetrics* const metrics_;
  const InferenceServiceOptions options_;
  HostMemoryBudget host_memory_;

  inference::GRPCInferenceService::AsyncService service_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> cqs_;
  std::vector<std::thread> pollers_;
  std::unique_ptr<WorkerPool> workers_;
  // Held shared while a new call is requested, exclusively to stop: a call must never
  // be requested on a queue that has been shut down.
  absl::Mutex request_mu_;
  bool stopping_ ABSL_GUARDED_BY(request_mu_) = false;
  absl::Mutex async_mu_;
  int async_replies_ ABSL_GUARDED_BY(async_mu_) = 0;
  bool started_ = false;

  absl::Mutex calls_mu_;
  int64_t unanswered_calls_ ABSL_GUARDED_BY(calls_mu_) = 0;
  // Raised by CutCallsInFlight; every ModelInfer hands it to the engine as its cancel flag.
  std::atomic<bool> cut_{false};
  std::atomic<int64_t> cut_requests_{0};
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_INFERENCE_SERVICE_H_
