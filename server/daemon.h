#ifndef NDSERVE_SERVER_DAEMON_H_
#define NDSERVE_SERVER_DAEMON_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/admin_service.h"
#include "server/health_service.h"
#include "server/metrics_exporter.h"
#include "server/options.h"

namespace grpc {
class Server;
class ServerBuilder;
class Service;
}  // namespace grpc

namespace ndserve {

class MemorySystem;

// A service served on the inference port (--grpc_address), next to the health service:
// the KServe GRPCInferenceService is one. The daemon calls, in this order and from one
// thread: Register (before the server is built), Start (once it runs), then at shutdown
// AwaitCallsAnswered and, when the exit timeout passed first, CutCallsInFlight, and Stop
// (after the server has shut down, so no call is in flight any more).
class PortService {
 public:
  virtual ~PortService() = default;
  // Register services and add completion queues.
  virtual void Register(grpc::ServerBuilder& builder) = 0;
  // Begin serving: request the first calls, start the completion-queue threads.
  virtual void Start(grpc::Server& server) = 0;
  // Shut the completion queues down, drain them and join the threads.
  virtual void Stop() = 0;
  // Once the server refuses new calls: waits until every call accepted so far has been
  // answered, or `deadline`. Whether none is left unanswered.
  virtual bool AwaitCallsAnswered(absl::Time /*deadline*/) { return true; }
  // The exit timeout passed: answer every call still queued or computing as soon as it
  // can stop (UNAVAILABLE, counted as failed). Returns how many were unanswered.
  virtual int CutCallsInFlight() { return 0; }
};

// The process's listeners and their lifecycle:
//   inference port  --grpc_address     grpc.health.v1.Health (HealthService) + every PortService
//   admin port      --admin_address    ndserve.admin.v1.MemoryAdmin (token rule)
//   metrics port    --metrics_address  Prometheus text at /metrics, the memory map at /memory
// and the state they share: HealthState, MetricsExporter (and its InferenceMetrics).
//
// main.cc builds one from validated Options and the process's MemorySystem (the one the
// engine allocates from), adds the PortServices, then: Start() -> (models load,
// health().SetReady(true)) -> wait for a signal -> StopServing() -> (models unload) ->
// Close().
//
// Owns its listeners, services and PortServices; reads and reclaims the pools of
// `memory` and reads its manager trees for admin and metrics (borrowed; it must outlive
// the daemon). Lifecycle methods are called from one thread; health(), metrics() and
// the port getters from any.
class Daemon {
 public:
  // Builds a service for the admin listener, under the admin token rule (the Trainer
  // service, docs/design.md §10.1); called by Start once the token is read.
  using AdminServiceFactory = std::function<std::unique_ptr<grpc::Service>(const AdminAuth& auth)>;

  Daemon(Options options, MemorySystem* memory);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Before Start.
  void AddPortService(std::unique_ptr<PortService> service);
  // Before Start.
  void AddAdminService(AdminServiceFactory factory);
  // Before Start: per-model memory for ndserve_model_memory_bytes and the admin status
  // (main.cc passes EngineModelMemory of its engine).
  void SetModelMemorySource(ModelMemorySource models);

  // Binds metrics, admin and inference listeners, in that order. An error names the
  // flag whose address could not be bound; listeners opened before it are closed again.
  absl::Status Start();

  // Graceful drain: readiness NOT_SERVING, new calls refused (GOAWAY), calls in flight get
  // up to --exit_timeout_seconds to finish; those still unanswered then are cut (their
  // clients get UNAVAILABLE, metrics count them failed). Once every call is answered the
  // remaining connections, idle ones included, are closed rather than waited for, and the
  // PortServices stop. Admin and metrics keep serving, so the drain and the unload can be
  // watched. docs/design.md §5.
  void StopServing();

  // Closes the admin and metrics listeners and logs every pool's final status.
  void Close();

  HealthState& health() { return health_; }
  InferenceMetrics& metrics() { return metrics_.inference(); }
  MetricsExporter& metrics_exporter() { return metrics_; }
  const Options& options() const { return options_; }
  MemorySystem* memory() const { return memory_; }

  // The /memory page for `memory` now (also what `ndserve-cli memory-map` writes).
  static std::string MemoryMapPage(MemorySystem& memory);

  // Bound ports (useful with port 0); 0 before Start.
  int grpc_port() const { return grpc_port_; }
  int admin_port() const { return admin_port_; }
  int metrics_port() const { return metrics_.port(); }

 private:
  absl::Status StartAdmin();
  absl::Status StartInference();
  // Whether every PortService answered its calls by `deadline`.
  bool AwaitCallsAnswered(absl::Time deadline);

  const Options options_;
  MemorySystem* const memory_;
  HealthState health_;
  HealthService health_service_{&health_};
  MetricsExporter metrics_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<grpc::Server> admin_server_;
  std::vector<AdminServiceFactory> admin_factories_;
  std::vector<std::unique_ptr<grpc::Service>> admin_services_;  // from admin_factories_
  std::unique_ptr<grpc::Server> grpc_server_;
  std::vector<std::unique_ptr<PortService>> port_services_;
  ModelMemorySource models_;
  bool port_services_started_ = false;
  int grpc_port_ = 0;
  int admin_port_ = 0;
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_DAEMON_H_
