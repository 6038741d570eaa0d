#include "server/daemon.h"

#include <grpc/grpc.h>
#include <grpc/support/time.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/logging.h"
#include "memory/device_pools.h"
#include "memory/memory_snapshot.h"
#include "memory/memory_system.h"
#include "memory/pool.h"
#include "server/memory_map_page.h"
#include "server/memory_snapshot_proto.h"
#include "server/tls_credentials.h"

namespace ndserve {
namespace {

// gRPC binds with SO_REUSEPORT by default, so a second daemon on the same port would
// start "successfully" and silently take half the connections. Refuse that instead.
void ExclusivePort(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

// How long requests cut by the exit timeout get to notice: they stop at their next graph
// node. Together with the rest of the exit this keeps it within 1 s of the timeout.
constexpr absl::Duration kCutGrace = absl::Milliseconds(500);
// How long ended health Watch streams get to deliver their last update and status. The wait
// ends as soon as every stream has; only a stream whose write cannot complete (a client
// that stopped reading with its window full) takes all of it. 500 ms was once too short
// for the NOT_SERVING write on a loaded 2-core machine under ASan: the watcher saw only
// SERVING before the stream was cut.
constexpr absl::Duration kWatchGrace = absl::Seconds(2);

// Admin calls are quick reads or a reclaim; at exit they get this long before the
// connections close, so that an idle admin channel delays nothing.
constexpr std::chrono::milliseconds kAdminCloseGrace(250);

}  // namespace

Daemon::Daemon(Options options, MemorySystem* memory)
    : options_(std::move(options)),
      memory_(memory),
      metrics_(&memory->pools(), [memory] { return MemoryCollector::NDManagerLevels(*memory); }) {
  metrics_.AddHtmlPage("/memory", [memory] { return MemoryMapPage(*memory); });
}

std::string Daemon::MemoryMapPage(MemorySystem& memory) {
  admin::v1::MemorySnapshot snapshot;
  MemorySnapshotToProto(TakeMemorySnapshot(memory), DeviceFilter::All(), &snapshot);
  return RenderMemoryMapPage(snapshot);
}

Daemon::~Daemon() {
  StopServing();
  Close();
}

void Daemon::AddPortService(std::unique_ptr<PortService> service) {
  port_services_.push_back(std::move(service));
}

void Daemon::AddAdminService(AdminServiceFactory factory) {
  admin_factories_.push_back(std::move(factory));
}

void Daemon::SetModelMemorySource(ModelMemorySource models) {
  models_ = models;
  metrics_.SetModelMemorySource(std::move(models));
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
  auto tls = [](const TlsFiles& files) {
    return !files.enabled() ? "plain text" : files.client_ca.empty() ? "TLS" : "mutual TLS";
  };
  LOG(INFO) << "listening: grpc " << options_.grpc_address << " (port " << grpc_port_ << ", "
            << tls(options_.grpc_tls) << "), metrics " << options_.metrics_address << " (port "
            << metrics_.port() << "), admin " << options_.admin_address << " (port " << admin_port_
            << ", " << tls(options_.admin_tls) << ", "
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
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ListenerCredentials(options_.admin_tls, "admin", options_.tls_reload_seconds);
  if (!credentials.ok()) return credentials.status();
  const AdminAuth auth(std::move(token));
  admin_service_ = std::make_unique<AdminServiceImpl>(memory_, auth, models_);
  grpc::ServerBuilder builder;
  ExclusivePort(builder);
  builder.AddListeningPort(options_.admin_address, *credentials, &admin_port_);
  builder.RegisterService(admin_service_.get());
  for (const AdminServiceFactory& factory : admin_factories_) {
    admin_services_.push_back(factory(auth));
    builder.RegisterService(admin_services_.back().get());
  }
  admin_server_ = builder.BuildAndStart();
  if (admin_server_ == nullptr || admin_port_ == 0) {
    admin_server_.reset();
    return absl::UnavailableError(
        absl::StrCat("--admin_address='", options_.admin_address, "': cannot listen"));
  }
  return absl::OkStatus();
}

absl::Status Daemon::StartInference() {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      ListenerCredentials(options_.grpc_tls, "grpc", options_.tls_reload_seconds);
  if (!credentials.ok()) return credentials.status();
  grpc::ServerBuilder builder;
  ExclusivePort(builder);
  builder.AddListeningPort(options_.grpc_address, *credentials, &grpc_port_);
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

bool Daemon::AwaitCallsAnswered(absl::Time deadline) {
  bool answered = true;
  if (port_services_started_) {
    for (const std::unique_ptr<PortService>& service : port_services_) {
      answered = service->AwaitCallsAnswered(deadline) && answered;
    }
  }
  return answered;
}

void Daemon::StopServing() {
  health_.SetReady(false);
  if (grpc_server_ != nullptr) {
    const absl::Time deadline = absl::Now() + absl::Seconds(options_.exit_timeout_seconds);
    LOG(INFO) << "draining: readiness NOT_SERVING, waiting up to " << options_.exit_timeout_seconds
              << " s for requests in flight";
    // Watch streams never end by themselves; they would hold the drain to its deadline.
    health_service_.EndWatches();
    // Refuses new calls and sends GOAWAY, without blocking. grpc::Server::Shutdown(deadline)
    // alone would wait for every connection to close, idle ones included (their clients
    // may take seconds to react to the GOAWAY), and at the deadline cancel calls still
    // computing without stopping the computation, which then held the exit anyway.
    // The core API: grpc::CompletionQueue would take the tag for one of its own tag objects.
    grpc_completion_queue* shutdown_cq = grpc_completion_queue_create_for_next(nullptr);
    grpc_server_shutdown_and_notify(grpc_server_->c_server(), shutdown_cq, /*tag=*/nullptr);
    if (!AwaitCallsAnswered(deadline)) {
      int cut = 0;
      for (const std::unique_ptr<PortService>& service : port_services_) {
        cut += service->CutCallsInFlight();
      }
      LOG(WARNING) << "exit timeout (" << options_.exit_timeout_seconds << " s) reached with "
                   << cut << " call" << (cut == 1 ? "" : "s")
                   << " unanswered: cutting them (UNAVAILABLE, counted as failed)";
      // A cut request stops at its next graph node, normally within milliseconds.
      if (!AwaitCallsAnswered(absl::Now() + kCutGrace)) {
        LOG(WARNING) << "calls still unanswered " << absl::FormatDuration(kCutGrace)
                     << " after the cut; closing their connections";
      }
    }
    // Watchers must see NOT_SERVING before their stream ends (a load balancer reads the
    // drop from it); give the ended streams a moment to deliver it, never the whole
    // timeout: a client that stopped reading must not hold the exit.
    health_service_.AwaitWatchesEnded(std::min(deadline, absl::Now() + kWatchGrace));
    // Nothing is left to answer: close every connection now (idle channels, and calls
    // gRPC accepted but never handed to a service), instead of waiting for clients.
    grpc_server_cancel_all_calls(grpc_server_->c_server());
    grpc_server_->Shutdown(std::chrono::system_clock::now());
    // Shutdown returned, so the notification is queued; drain it before destroying.
    grpc_completion_queue_shutdown(shutdown_cq);
    while (
        grpc_completion_queue_next(shutdown_cq, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr).type !=
        GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(shutdown_cq);
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
    admin_server_->Shutdown(std::chrono::system_clock::now() + kAdminCloseGrace);
    admin_server_->Wait();
    admin_server_.reset();
    admin_service_.reset();
    admin_services_.clear();
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
