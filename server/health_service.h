#ifndef NDSERVE_SERVER_HEALTH_SERVICE_H_
#define NDSERVE_SERVER_HEALTH_SERVICE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/health.grpc.pb.h"

namespace ndserve {

// The daemon's liveness and readiness:
//   "liveness"  - SERVING while the process is up; it stays SERVING through a graceful
//                 shutdown so that an orchestrator does not kill a draining daemon.
//   "readiness" - SERVING once every model asked for at start is loaded, until shutdown
//                 begins. "" (the whole server) always equals readiness.
// The inference service's ServerLive / ServerReady answer from live() / ready(); the
// HealthService below answers grpc.health.v1.Health from Serving().
//
// Starts live and not ready. Thread-safe.
class HealthState {
 public:
  static constexpr char kLiveness[] = "liveness";
  static constexpr char kReadiness[] = "readiness";

  // Told about every change, under the state's lock: must not call back into the state.
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void HealthChanged(bool live, bool ready) = 0;
  };

  // The rule above, for a name: SERVING (true) or not (false); nullopt for a name the
  // daemon does not know.
  static std::optional<bool> ServingFor(absl::string_view service, bool live, bool ready);

  HealthState() = default;
  HealthState(const HealthState&) = delete;
  HealthState& operator=(const HealthState&) = delete;

  void SetLive(bool live);
  void SetReady(bool ready);
  bool live() const;
  bool ready() const;
  std::optional<bool> Serving(absl::string_view service) const;

  // The listener is told the current state at once and every change afterwards, until
  // RemoveListener returns (after which it is never called again).
  void AddListener(Listener* listener);
  void RemoveListener(Listener* listener);

 private:
  void NotifyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  bool live_ ABSL_GUARDED_BY(mu_) = true;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Listener*> listeners_ ABSL_GUARDED_BY(mu_);
};

// grpc.health.v1.Health (Check and Watch) over a HealthState, as a callback service, so
// it runs on gRPC's own threads next to any async service on the same port. Check of an
// unknown name is NOT_FOUND; Watch of one streams SERVICE_UNKNOWN, as the protocol says.
//
// Reads `state` (not owned; must outlive the service and every server it is registered
// on). Thread-safe.
class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit HealthService(HealthState* state) : state_(state) {}
  ~HealthService() override;

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

  // Ends every open Watch stream with OK after its last update went out. Call before
  // shutting the server down: Watch streams never end on their own and would hold the
  // drain for the whole exit timeout. Later Watch calls are refused with UNAVAILABLE.
  void EndWatches();
  // Waits until every ended Watch stream is done (its last update and status delivered,
  // or its client gone), at most until `deadline`. True when none is left.
  bool AwaitWatchesEnded(absl::Time deadline);

 private:
  class WatchReactor;
  void Forget(WatchReactor* watch);

  HealthState* const state_;
  absl::Mutex mu_;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<WatchReactor*> watches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_HEALTH_SERVICE_H_
