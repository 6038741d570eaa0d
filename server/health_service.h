#ifndef NDSERVE_SERVER_HEALTH_SERVICE_H_
#define NDSERVE_SERVER_HEALTH_SERVICE_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace grpc {
class Server;
class HealthCheckServiceInterface;
}  // namespace grpc

namespace ndserve {

// The daemon's liveness and readiness, answered on `grpc.health.v1.Health` by gRPC's
// built-in health service (Check and Watch) of every server attached here:
//   "liveness"  - SERVING while the process is up; it stays SERVING through a graceful
//                 shutdown so that an orchestrator does not kill a draining daemon.
//   "readiness" - SERVING once every model asked for at start is loaded and until
//                 shutdown begins. "" (the whole server) always equals readiness.
// The inference service's ServerLive / ServerReady answer from live() / ready().
//
// Starts live and not ready. Owns nothing: attached servers must be detached before
// they are destroyed. Thread-safe.
class HealthState {
 public:
  static constexpr char kLiveness[] = "liveness";
  static constexpr char kReadiness[] = "readiness";

  // Turns gRPC's built-in health service on for every server built after this call.
  // Call once from main (or a test) before building servers: gRPC's switch is a
  // process-wide setting and not thread-safe.
  static void EnableForNewServers();

  HealthState() = default;
  HealthState(const HealthState&) = delete;
  HealthState& operator=(const HealthState&) = delete;

  // Publishes the current state on `server` and keeps it up to date from now on.
  // FAILED_PRECONDITION when the server was built before EnableForNewServers().
  absl::Status Attach(grpc::Server* server);
  void Detach(grpc::Server* server);

  void SetLive(bool live);
  void SetReady(bool ready);
  bool live() const;
  bool ready() const;

 private:
  void Publish(grpc::HealthCheckServiceInterface* service) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  bool live_ ABSL_GUARDED_BY(mu_) = true;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  struct Attached {
    grpc::Server* server;
    grpc::HealthCheckServiceInterface* service;
  };
  std::vector<Attached> attached_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_HEALTH_SERVICE_H_
