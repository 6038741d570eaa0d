// ndserved: the model-serving daemon. The only place that knows about flags: they are
// bound into an Options value here and everything below takes Options.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/logging.h"
#include "engine/engine.h"
#include "kernels/cpu/parallel_spin.h"
#include "kernels/gpu_resources.h"
#include "memory/leak_tracker.h"
#include "memory/memory_config.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "server/daemon.h"
#include "server/http_service.h"
#include "server/model_memory_source.h"
#include "server/inference_service.h"
#include "server/model_lifecycle.h"
#include "server/options.h"
#include "server/shutdown_signal.h"
#include "server/trainer_service.h"

#ifndef NDSERVE_VERSION
#define NDSERVE_VERSION "dev"
#endif

ABSL_FLAG(std::string, model_repository, "",
          "Model repository: <repo>/<model>/config.pbtxt and <repo>/<model>/<version>/model.onnx. "
          "Default: examples/models of the installation or source tree.");
ABSL_FLAG(std::string, grpc_address, "0.0.0.0:8001",
          "Inference API (KServe v2 gRPC) and grpc.health.v1 listener, host:port.");
ABSL_FLAG(std::string, http_address, "0.0.0.0:8000",
          "Inference API over KServe v2 HTTP/REST (JSON and binary tensors), host:port; empty: "
          "no HTTP listener.");
ABSL_FLAG(int, http_threads, 0,
          "HTTP connection threads; each open keep-alive connection holds one, so this bounds "
          "the concurrent HTTP clients. 0: 64.");
ABSL_FLAG(int, http_read_timeout_seconds, 30,
          "An HTTP client that stalls this long while sending a request (or idles this long "
          "on a keep-alive connection) is disconnected.");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0:8002",
          "Prometheus listener, host:port; metrics at http://<address>/metrics.");
ABSL_FLAG(std::string, admin_address, "127.0.0.1:8003",
          "Memory admin API listener, host:port. Beyond loopback only with --admin_token_file "
          "and --admin_tls_cert/--admin_tls_key.");
ABSL_FLAG(std::string, admin_token_file, "",
          "File holding the admin bearer token; when set, admin calls need metadata "
          "'authorization: Bearer <token>'.");
ABSL_FLAG(std::string, device, "auto", "Serving device: auto (first GPU, else CPU), cpu, cuda:N.");
ABSL_FLAG(std::string, memory_pool, "",
          "Memory pool kind: binned, split, simple or none. Default: $NDSERVE_MEMORY_POOL, "
          "else binned.");
ABSL_FLAG(std::string, memory_limit, "",
          "Cap on the memory a pool holds from its device (cached bytes count): bytes, 512MiB, "
          "8GiB, 1.5GB or 80%. Default: $NDSERVE_MEMORY_LIMIT, else none.");
ABSL_FLAG(std::string, debug_level, "",
          "Leak tracking: 0 off, 1 count live allocations and their owners, 2 also record "
          "stack traces. Default: $NDSERVE_DEBUG_LEVEL, else 0.");
ABSL_FLAG(std::string, memory_thread_cache, "",
          "Binned pool: bytes of freed blocks up to 1 MiB each thread keeps for itself (0 or "
          "off: none). Counted as cached; Reclaim and memory pressure take them back. "
          "Default: $NDSERVE_MEMORY_THREAD_CACHE, else 4MiB.");
ABSL_FLAG(std::string, intra_op_spin_us, "",
          "Microseconds the CPU kernels' intra-op pool polls for work before its threads "
          "block (0: never poll). Default: $NDSERVE_INTRA_OP_SPIN_US, else 200.");
ABSL_FLAG(std::string, infer_worker_spin_us, "",
          "Microseconds an idle ModelInfer worker watches for the next call before it "
          "sleeps, saving the thread wake-up on a lightly loaded daemon at the cost of a "
          "busy core meanwhile (0: sleep at once). Default: $NDSERVE_INFER_WORKER_SPIN_US, "
          "else 500 on a GPU device and 0 on the CPU.");
ABSL_FLAG(int, exit_timeout_seconds, 30,
          "On SIGTERM/SIGINT, how long requests in flight may take to finish; those still "
          "running then are answered UNAVAILABLE, and the process exits within about 1 s "
          "more (status 1 if something would not stop).");
ABSL_FLAG(ndserve::ModelControlMode, model_control_mode, ndserve::ModelControlMode::kExplicit,
          "explicit: load every model at start and let the repository RPCs load and unload; "
          "none: load every model at start and refuse the repository RPCs (UNAVAILABLE).");
// Bounds on host memory outside the pools.
ABSL_FLAG(std::string, max_request_bytes, "256MiB",
          "Largest request message accepted; gRPC refuses a larger one (RESOURCE_EXHAUSTED) from "
          "its length prefix. At most 2147483647.");
ABSL_FLAG(std::string, max_response_bytes, "1GiB",
          "Largest inference response built; a larger one is refused (RESOURCE_EXHAUSTED) "
          "before it is encoded. At most 2147483647.");
ABSL_FLAG(std::string, max_inflight_host_bytes, "4GiB",
          "Host memory that inference requests and responses in flight may hold together "
          "(gauge ndserve_host_request_bytes); beyond it requests get RESOURCE_EXHAUSTED. "
          "none: count only.");
ABSL_FLAG(int, max_pending_infer, 1024,
          "ModelInfer calls waiting for a worker beyond this many are refused at once with "
          "UNAVAILABLE (overload shedding); 0: no limit.");

// TLS (netlife).
ABSL_FLAG(std::string, grpc_tls_cert, "",
          "PEM certificate chain for the inference port; with --grpc_tls_key it serves TLS "
          "only.");
ABSL_FLAG(std::string, grpc_tls_key, "", "PEM private key of --grpc_tls_cert.");
ABSL_FLAG(std::string, grpc_tls_client_ca, "",
          "PEM CA certificates; when set, inference clients must present a certificate "
          "this CA signed (mutual TLS).");
ABSL_FLAG(std::string, admin_tls_cert, "",
          "PEM certificate chain for the admin port; with --admin_tls_key it serves TLS only. "
          "Required when --admin_address is beyond loopback.");
ABSL_FLAG(std::string, admin_tls_key, "", "PEM private key of --admin_tls_cert.");
ABSL_FLAG(int, infer_workers, 0,
          "Threads that decode ModelInfer requests, run lone requests on idle models and "
          "encode responses; 0: one per core.");
ABSL_FLAG(int, tls_reload_seconds, 0,
          "Every this many seconds the TLS listeners re-read their certificate, key and "
          "client CA files, so that a rotated certificate is served without a restart; "
          "0: read once at start.");
ABSL_FLAG(std::string, admin_tls_client_ca, "",
          "PEM CA certificates; when set, admin clients must present a certificate this CA "
          "signed (mutual TLS).");
ABSL_FLAG(std::string, http_tls_cert, "",
          "PEM certificate chain for the HTTP/REST port; with --http_tls_key it serves HTTPS "
          "only (re-read as --tls_reload_seconds says).");
ABSL_FLAG(std::string, http_tls_key, "", "PEM private key of --http_tls_cert.");
ABSL_FLAG(std::string, http_tls_client_ca, "",
          "PEM CA certificates; when set, HTTP clients must present a certificate this CA "
          "signed (mutual TLS).");
ABSL_FLAG(int, train_session_idle_seconds, 600,
          "Trainer service (on the admin listener): a training session unused this many "
          "seconds is aborted and its memory freed.");

namespace ndserve {
namespace {

Options OptionsFromFlags() {
  Options o;
  o.model_repository = absl::GetFlag(FLAGS_model_repository);
  o.grpc_address = absl::GetFlag(FLAGS_grpc_address);
  o.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  o.http_address = absl::GetFlag(FLAGS_http_address);
  o.http_threads = absl::GetFlag(FLAGS_http_threads);
  o.http_read_timeout_seconds = absl::GetFlag(FLAGS_http_read_timeout_seconds);
  o.admin_address = absl::GetFlag(FLAGS_admin_address);
  o.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  o.device = absl::GetFlag(FLAGS_device);
  o.memory_pool = absl::GetFlag(FLAGS_memory_pool);
  o.memory_limit = absl::GetFlag(FLAGS_memory_limit);
  o.debug_level = absl::GetFlag(FLAGS_debug_level);
  o.memory_thread_cache = absl::GetFlag(FLAGS_memory_thread_cache);
  o.intra_op_spin_us = absl::GetFlag(FLAGS_intra_op_spin_us);
  o.infer_worker_spin_us = absl::GetFlag(FLAGS_infer_worker_spin_us);
  o.exit_timeout_seconds = absl::GetFlag(FLAGS_exit_timeout_seconds);
  o.model_control_mode = absl::GetFlag(FLAGS_model_control_mode);
  o.max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  o.max_response_bytes = absl::GetFlag(FLAGS_max_response_bytes);
  o.max_inflight_host_bytes = absl::GetFlag(FLAGS_max_inflight_host_bytes);
  o.max_pending_infer = absl::GetFlag(FLAGS_max_pending_infer);
  o.grpc_tls = {.cert = absl::GetFlag(FLAGS_grpc_tls_cert),
                .key = absl::GetFlag(FLAGS_grpc_tls_key),
                .client_ca = absl::GetFlag(FLAGS_grpc_tls_client_ca)};
  o.train_session_idle_seconds = absl::GetFlag(FLAGS_train_session_idle_seconds);
  o.admin_tls = {.cert = absl::GetFlag(FLAGS_admin_tls_cert),
                 .key = absl::GetFlag(FLAGS_admin_tls_key),
                 .client_ca = absl::GetFlag(FLAGS_admin_tls_client_ca)};
  o.tls_reload_seconds = absl::GetFlag(FLAGS_tls_reload_seconds);
  o.http_tls = {.cert = absl::GetFlag(FLAGS_http_tls_cert),
                .key = absl::GetFlag(FLAGS_http_tls_key),
                .client_ca = absl::GetFlag(FLAGS_http_tls_client_ca)};
  o.infer_workers = absl::GetFlag(FLAGS_infer_workers);
  return o;
}

int StartupError(const absl::Status& status) {
  LOG(ERROR) << "ndserved cannot start: " << status.message();
  return EXIT_FAILURE;
}

int Run(Options options) {
  if (options.model_repository.empty()) options.model_repository = DefaultModelRepository();
  if (absl::Status s = ValidateOptions(options); !s.ok()) return StartupError(s);
  SetShutdownExitTimeout(absl::Seconds(options.exit_timeout_seconds));
  absl::StatusOr<MemoryConfig> memory = ResolveMemoryConfig(options);
  if (!memory.ok()) return StartupError(memory.status());
  absl::StatusOr<Device> device = ResolveDevice(options.device);
  if (!device.ok()) return StartupError(device.status());
  absl::StatusOr<HostBounds> bounds = ResolveHostBounds(options);
  if (!bounds.ok()) return StartupError(bounds.status());
  absl::StatusOr<int> spin_micros = ResolveIntraOpSpinMicros(options);
  if (!spin_micros.ok()) return StartupError(spin_micros.status());
  // Before any model loads, so that no parallel region has run with the default.
  kernels::cpu::SetParallelSpinMicros(*spin_micros);
  absl::StatusOr<int> worker_spin_micros = ResolveInferWorkerSpinMicros(options, *device);
  if (!worker_spin_micros.ok()) return StartupError(worker_spin_micros.status());

  LOG(INFO) << "ndserved " << NDSERVE_VERSION << " starting: device " << device->ToString()
            << ", memory pool " << PoolKindName(memory->pool) << ", debug level "
            << memory->debug_level << ", intra-op spin " << *spin_micros
            << " us, infer worker spin " << *worker_spin_micros
            << " us, model repository '" << options.model_repository
            << "', model control " << ModelControlModeName(options.model_control_mode);

  // The one memory system of the process: the engine allocates from it, admin and
  // metrics read it. Declared first, so that it outlives everything that borrows it.
  MemorySystem memory_system(*memory);
  if (absl::StatusOr<std::shared_ptr<NDManager>> root = memory_system.SystemManager(*device);
      !root.ok()) {
    return StartupError(root.status());
  }

  // Declared before the daemon, so that it outlives the inference service that uses it.
  engine::Engine engine(engine::EngineOptions{.model_repository = options.model_repository,
                                              .device = *device,
                                              .stop_loading = ShutdownFlag()},
                        &memory_system);
  Daemon daemon(options, &memory_system);
  daemon.SetModelMemorySource(EngineModelMemory(&engine));
  ModelLifecycle lifecycle(&engine, &daemon.metrics());
  auto inference = std::make_unique<InferenceServiceImpl>(
      &engine, &lifecycle, &daemon.health(), &daemon.metrics(),
      InferenceServiceOptions{.server_version = NDSERVE_VERSION,
                              .model_control_mode = options.model_control_mode,
                              .workers = options.infer_workers,
                              .worker_spin_micros = *worker_spin_micros,
                              .max_response_bytes = bounds->max_response_bytes,
                              .max_inflight_host_bytes = bounds->max_inflight_host_bytes,
                              .max_pending_infer = options.max_pending_infer});
  // The HTTP binding calls the gRPC service's handlers (one codec, two bindings); the
  // daemon owns that service and keeps it until after http.Stop().
  InferenceServiceImpl* const inference_service = inference.get();
  daemon.AddPortService(std::move(inference));
  // Fine-tuning of served models (docs/design.md §10.1), under the admin token rule.
  daemon.AddAdminService([&engine, &daemon, &options](const AdminAuth& auth) {
    return std::make_unique<TrainerServiceImpl>(
        &engine, &daemon.metrics_exporter().trainer(), auth,
        TrainerServiceOptions{
            .session_idle_timeout = absl::Seconds(options.train_session_idle_seconds)});
  });
  // Listeners first: health, metrics and admin answer while the models load.
  if (absl::Status s = daemon.Start(); !s.ok()) return StartupError(s);
  std::optional<HttpService> http;
  if (!options.http_address.empty()) {
    http.emplace(inference_service,
                 HttpServiceOptions{.address = options.http_address,
                                    .threads = options.http_threads,
                                    .read_timeout_seconds = options.http_read_timeout_seconds,
                                    .max_request_bytes = bounds->max_request_bytes,
                                    .tls = options.http_tls,
                                    .tls_reload_seconds = options.tls_reload_seconds});
    if (absl::Status s = http->Start(); !s.ok()) return StartupError(s);
  }
  // Both control modes load the whole repository at start (as Triton's "none" and
  // "explicit --load-model=*"). A model that fails is logged and listed UNAVAILABLE in the
  // repository index; the daemon serves the others.
  if (absl::Status s = lifecycle.LoadAll(); !s.ok()) {
    LOG(WARNING) << "serving without the models that failed to load: " << s.message();
  }
  // A signal during start-up (logged when it came) skips readiness: straight to the drain.
  if (!ShutdownRequested()) {
    daemon.health().SetReady(true);
    LOG(INFO) << "ready";
  }

  const int sig = WaitForShutdownSignal();
  LOG(INFO) << "received " << strsignal(sig) << ", shutting down";
  // HTTP first: it stops accepting and lets its requests in flight finish (the exit
  // timeout's forced exit bounds that). Then readiness off, new gRPC calls refused, calls
  // in flight finish; then the models' memory goes back to the pools, which Close
  // reports (zero allocated).
  if (http.has_value()) http->Stop();
  daemon.StopServing();
  lifecycle.UnloadAll();
  daemon.Close();
  LOG(INFO) << "stopped";
  return EXIT_SUCCESS;
}

}  // namespace
}  // namespace ndserve

int main(int argc, char** argv) {
  // Debian's Abseil is built without NDEBUG, so every Mutex lock would also feed the
  // deadlock detector's lock graph: about 5 % of the daemon's CPU at concurrency 64 (perf,
  // GraphCycles::GetId and friends). Off before any lock is taken; the test suites set
  // NDSERVE_MUTEX_DEADLOCK_DETECTION=1 so that a lock-order cycle still aborts there.
  if (const char* detect = std::getenv("NDSERVE_MUTEX_DEADLOCK_DETECTION");
      detect == nullptr || std::string_view(detect) != "1") {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  // Before any library starts a thread, so that every thread inherits the mask.
  ndserve::InstallShutdownSignals();
  ndserve::kernels::GpuResources::DisableDefaultCublasWorkspace();
  absl::FlagsUsageConfig usage;
  // --help lists the daemon's own flags (defined here), not only those of a file named
  // like the binary, which is Abseil's default.
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] { return absl::StrCat("ndserved ", NDSERVE_VERSION, "\n"); };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      absl::StrCat("ndserved ", NDSERVE_VERSION,
                   ": serves ONNX models over KServe v2 gRPC and HTTP/REST.\n"
                   "NDSERVE_MEMORY_POOL, NDSERVE_MEMORY_LIMIT, NDSERVE_DEBUG_LEVEL, "
                   "NDSERVE_MEMORY_THREAD_CACHE and NDSERVE_INTRA_OP_SPIN_US give the "
                   "defaults of --memory_pool, --memory_limit, --debug_level, "
                   "--memory_thread_cache and --intra_op_spin_us.\n"
                   "Usage: ndserved [flags]"));
  absl::ParseCommandLine(argc, argv);
  ndserve::InitializeSymbolizer(argv[0]);
  return ndserve::Run(ndserve::OptionsFromFlags());
}
