#include "server/daemon.h"

#include <grpc/grpc.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <climits>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "memory/device_pools.h"
#include "memory/memory_system.h"
#include "memory/pool.h"

namespace ndserve {
namespace {

// gRPC binds with SO_REUSEPORT by default, so a second daemon on the same port would
// start "successfully" and silently take half the connections. Refuse that instead.
void ExclusivePort(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

}  // namespace

Daemon::Daemon(Options options, MemorySystem* memory)
    : options_(std::move(options)),
      memory_(memory),
      metrics_(&memory->pools(), [memory] { return MemoryCollector::NDManagerLevels(*memory); }) {}

Daemon::~Daemon() {
  StopServing();
  Close();
}

void Daemon::AddPortService(std::unique_ptr<PortService> service) {
  port_services_.push_back(std::move(service));
}

absl::Status Daemon::Start() {
  absl::Status status = metrics_.Start(options_.metrics_address);
  if (status.ok()) status = StartAdmin();
  if (status.ok()) status = StartInference();
  if (!status.ok()) {
    StopServing();
    Close();
    return status;
  }
  LOG(INFO) << "listening: grpc " << options_.grpc_address << " (port " << grpc_port_
            << "), metrics " << options_.metrics_address << " (port " << metrics_.port()
            << "), admin " << options_.admin_address << " (port " << admin_port_ << ", "
            << (options_.admin_token_file.empty() ? "no token" : "token required") << ")";
  return absl::OkStatus();
}

absl::Status Daemon::StartAdmin() {
  std::string token;
  if (!options_.admin_token_file.empty()) {
    std::string warning;
    absl::StatusOr<std::string> read = ReadAdminToken(options_.admin_token_file, &warning);
    if (!read.ok()) return read.status();
    if (!warning.empty()) LOG(WARNING) << warning;
    token = std::move(*read);
  }
  admin_service_ = std::make_unique<AdminServiceImpl>(memory_, AdminAuth(std::move(token)));
  grpc::ServerBuilder builder;
  ExclusivePort(builder);
  builder.AddListeningPort(options_.admin_address, grpc::InsecureServerCredentials(), &admin_port_);
  builder.RegisterService(admin_service_.get());
  admin_server_ = builder.BuildAndStart();
  if (admin_server_ == nullptr || admin_port_ == 0) {
    admin_server_.reset();
    return absl::UnavailableError(
        absl::StrCat("--admin_address='", options_.admin_address, "': cannot listen"));
  }
  return absl::OkStatus();
}

absl::Status Daemon::StartInference() {
  grpc::ServerBuilder builder;
  ExclusivePort(builder);
  builder.AddListeningPort(options_.grpc_address, grpc::InsecureServerCredentials(), &grpc_port_);
  // Tensors routinely exceed gRPC's 4 MiB default, so the cap is the operator's
  // (--max_request_bytes). It is fixed before any model loads (the listeners start
  // first and models come and go at run time), so it cannot follow the models' inputs.
  absl::StatusOr<HostBounds> bounds = ResolveHostBounds(options_);
  if (!bounds.ok()) return bounds.status();
  builder.SetMaxReceiveMessageSize(static_cast<int>(bounds->max_request_bytes));
  builder.SetMaxSendMessageSize(INT_MAX);
  builder.RegisterService(&health_service_);
  for (const std::unique_ptr<PortService>& service : port_services_) service->Register(builder);
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || grpc_port_ == 0) {
    grpc_server_.reset();
    return absl::UnavailableError(
        absl::StrCat("--grpc_address='", options_.grpc_address, "': cannot listen"));
  }
  for (const std::unique_ptr<PortService>& service : port_services_) {
    service->Start(*grpc_server_);
  }
  port_services_started_ = true;
  return absl::OkStatus();
}

void Daemon::StopServing() {
  health_.SetReady(false);
  if (grpc_server_ != nullptr) {
    LOG(INFO) << "draining: readiness NOT_SERVING, waiting up to " << options_.exit_timeout_seconds
              << " s for requests in flight";
    // Watch streams never end by themselves; they would hold the drain to its deadline.
    health_service_.EndWatches();
    // Refuses new calls at once; calls still running at the deadline are cancelled.
    grpc_server_->Shutdown(std::chrono::system_clock::now() +
                           std::chrono::seconds(options_.exit_timeout_seconds));
  }
  if (port_services_started_) {
    for (const std::unique_ptr<PortService>& service : port_services_) service->Stop();
    port_services_started_ = false;
  }
  if (grpc_server_ != nullptr) {
    grpc_server_->Wait();
    grpc_server_.reset();
  }
}

void Daemon::Close() {
  if (admin_server_ != nullptr) {
    admin_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    admin_server_->Wait();
    admin_server_.reset();
    admin_service_.reset();
    for (const Pool* pool : memory_->AllPools()) {
      const PoolStats s = pool->Stats();
      LOG(INFO) << "final pool status on " << pool->device().ToString() << ": "
                << FormatBytes(s.allocated_bytes) << " allocated in " << s.outstanding_allocations
                << " blocks, " << FormatBytes(s.cached_bytes) << " cached, peak "
                << FormatBytes(s.peak_allocated_bytes) << ", " << s.oom_count << " OOMs";
    }
  }
  metrics_.Stop();
}

}  // namespace ndserve
