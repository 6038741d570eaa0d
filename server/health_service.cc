#include "server/health_service.h"

#include <algorithm>
#include <string>

namespace ndserve {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

std::optional<bool> HealthState::ServingFor(absl::string_view service, bool live, bool ready) {
  if (service == kLiveness) return live;
  if (service == kReadiness || service.empty()) return ready;
  return std::nullopt;
}

void HealthState::SetLive(bool live) {
  absl::MutexLock lock(&mu_);
  live_ = live;
  NotifyLocked();
}

void HealthState::SetReady(bool ready) {
  absl::MutexLock lock(&mu_);
  ready_ = ready;
  NotifyLocked();
}

bool HealthState::live() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

bool HealthState::ready() const {
  absl::MutexLock lock(&mu_);
  return ready_;
}

std::optional<bool> HealthState::Serving(absl::string_view service) const {
  absl::MutexLock lock(&mu_);
  return ServingFor(service, live_, ready_);
}

void HealthState::AddListener(Listener* listener) {
  absl::MutexLock lock(&mu_);
  listeners_.push_back(listener);
  listener->HealthChanged(live_, ready_);
}

void HealthState::RemoveListener(Listener* listener) {
  absl::MutexLock lock(&mu_);
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), listener), listeners_.end());
}

void HealthState::NotifyLocked() {
  // Under mu_, so that listeners see changes in the order they were made.
  for (Listener* listener : listeners_) listener->HealthChanged(live_, ready_);
}

// One Watch stream. Writes the watched name's status when it changes, one write in
// flight at a time (a change during a write is sent when the write completes). Owns
// itself: deleted in OnDone, after it left the state's and the service's lists.
// Lock order: HealthState::mu_ or HealthService::mu_, then mu_.
class HealthService::WatchReactor final : public grpc::ServerWriteReactor<HealthCheckResponse>,
                                          public HealthState::Listener {
 public:
  WatchReactor(HealthService* service, std::string name)
      : service_(service), name_(std::move(name)) {}

  // After construction, so that the first HealthChanged finds a complete object.
  void Begin() { service_->state_->AddListener(this); }

  void HealthChanged(bool live, bool ready) override {
    const std::optional<bool> serving = HealthState::ServingFor(name_, live, ready);
    const HealthCheckResponse::ServingStatus status =
        !serving ? HealthCheckResponse::SERVICE_UNKNOWN
                 : (*serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
    absl::MutexLock lock(&mu_);
    if (finishing_ || (status == latest_ && sent_any_)) return;
    latest_ = status;
    sent_any_ = true;
    pending_ = true;
    if (!writing_) WriteLocked();
  }

  // Finish once the latest status went out.
  void End() {
    absl::MutexLock lock(&mu_);
    end_requested_ = true;
    if (!writing_ && !pending_) FinishLocked(grpc::Status::OK);
  }

  // Ends the stream at once, e.g. refused before it began.
  void Abort(const grpc::Status& status) {
    absl::MutexLock lock(&mu_);
    FinishLocked(status);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "health watch stream broken"));
    } else if (pending_) {
      WriteLocked();
    } else if (end_requested_) {
      FinishLocked(grpc::Status::OK);
    }
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    service_->state_->RemoveListener(this);
    service_->Forget(this);
    delete this;
  }

 private:
  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    response_.set_status(latest_);
    pending_ = false;
    writing_ = true;
    StartWrite(&response_);
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    Finish(status);
  }

  HealthService* const service_;
  const std::string name_;
  absl::Mutex mu_;
  HealthCheckResponse response_ ABSL_GUARDED_BY(mu_);
  HealthCheckResponse::ServingStatus latest_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  bool sent_any_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool end_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
};

HealthService::~HealthService() = default;

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::optional<bool> serving = state_->Serving(request->service());
  if (!serving) {
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                 "unknown health service (known: liveness, readiness, \"\")"));
  } else {
    response->set_status(*serving ? HealthCheckResponse::SERVING
                                  : HealthCheckResponse::NOT_SERVING);
    reactor->Finish(grpc::Status::OK);
  }
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request) {
  (void)context;
  auto* watch = new WatchReactor(this, request->service());
  {
    absl::MutexLock lock(&mu_);
    if (ending_) {
      watch->Abort(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
      return watch;  // its OnDone unregisters nothing and deletes it
    }
    watches_.push_back(watch);
  }
  watch->Begin();
  return watch;
}

void HealthService::EndWatches() {
  absl::MutexLock lock(&mu_);
  ending_ = true;
  for (WatchReactor* watch : watches_) watch->End();
}

bool HealthService::AwaitWatchesEnded(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return watches_.empty(); };
  return mu_.AwaitWithDeadline(absl::Condition(&none), deadline);
}

void HealthService::Forget(WatchReactor* watch) {
  absl::MutexLock lock(&mu_);
  watches_.erase(std::remove(watches_.begin(), watches_.end(), watch), watches_.end());
}

}  // namespace ndserve
