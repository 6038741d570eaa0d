#include "server/health_service.h"

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server.h>

#include <algorithm>

namespace ndserve {

void HealthState::EnableForNewServers() { grpc::EnableDefaultHealthCheckService(true); }

absl::Status HealthState::Attach(grpc::Server* server) {
  grpc::HealthCheckServiceInterface* service = server->GetHealthCheckService();
  if (service == nullptr) {
    return absl::FailedPreconditionError(
        "server has no health service: call HealthState::EnableForNewServers() before "
        "building it");
  }
  absl::MutexLock lock(&mu_);
  attached_.push_back({server, service});
  Publish(service);
  return absl::OkStatus();
}

void HealthState::Detach(grpc::Server* server) {
  absl::MutexLock lock(&mu_);
  attached_.erase(std::remove_if(attached_.begin(), attached_.end(),
                                 [server](const Attached& a) { return a.server == server; }),
                  attached_.end());
}

void HealthState::SetLive(bool live) {
  absl::MutexLock lock(&mu_);
  live_ = live;
  for (const Attached& a : attached_) Publish(a.service);
}

void HealthState::SetReady(bool ready) {
  absl::MutexLock lock(&mu_);
  ready_ = ready;
  for (const Attached& a : attached_) Publish(a.service);
}

bool HealthState::live() const {
  absl::MutexLock lock(&mu_);
  return live_;
}

bool HealthState::ready() const {
  absl::MutexLock lock(&mu_);
  return ready_;
}

void HealthState::Publish(grpc::HealthCheckServiceInterface* service) const {
  // Under mu_, so that two racing setters cannot publish out of order.
  service->SetServingStatus(kLiveness, live_);
  service->SetServingStatus(kReadiness, ready_);
  service->SetServingStatus("", ready_);
}

}  // namespace ndserve
