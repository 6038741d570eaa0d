#ifndef NDSERVE_SERVER_OPTIONS_H_
#define NDSERVE_SERVER_OPTIONS_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "memory/device.h"
#include "memory/memory_config.h"
#include "server/tls_credentials.h"

namespace ndserve {

// The environment variables that give the memory flags their defaults (README
// "Memory configuration"). Read here only: memory/ never looks at the environment.
inline constexpr char kPoolEnv[] = "NDSERVE_MEMORY_POOL";
inline constexpr char kLimitEnv[] = "NDSERVE_MEMORY_LIMIT";
inline constexpr char kDebugLevelEnv[] = "NDSERVE_DEBUG_LEVEL";
inline constexpr char kThreadCacheEnv[] = "NDSERVE_MEMORY_THREAD_CACHE";
// The intra-op pool's spin budget (kernels/cpu/parallel_spin.h).
inline constexpr char kIntraOpSpinEnv[] = "NDSERVE_INTRA_OP_SPIN_US";
// How long an idle ModelInfer worker watches for the next call (server/worker_pool.h).
inline constexpr char kInferWorkerSpinEnv[] = "NDSERVE_INFER_WORKER_SPIN_US";
// The most it may be set to: beyond a few milliseconds it is a busy loop.
inline constexpr int kMaxInferWorkerSpinMicros = 10000;
// Its default on a GPU daemon, whose cores mostly wait for the device: at concurrency 1
// on an H100 it doubled mlp's requests per second (docs/design.md §4.3). A CPU daemon
// needs its cores for the kernels and does not spin by default.
inline constexpr int kGpuInferWorkerSpinMicros = 500;

// What the repository RPCs may do (docs/design.md §5).
enum class ModelControlMode {
  kExplicit,  // every model is loaded at start; the repository RPCs load and unload
  kNone,      // every model is loaded at start; the repository RPCs are UNAVAILABLE
};

absl::string_view ModelControlModeName(ModelControlMode mode);

// Abseil flag support, so that --model_control_mode parses straight into the enum and a
// bad value is reported by the flags library naming the flag.
bool AbslParseFlag(absl::string_view text, ModelControlMode* mode, std::string* error);
std::string AbslUnparseFlag(ModelControlMode mode);

// The daemon's settings as the operator wrote them: main.cc binds its flags into this
// struct and nothing else reads flags. The four memory settings stay text here,
// because where a value came from (flag or environment variable) decides what an error
// names; ResolveMemoryConfig turns them into the MemoryConfig that main.cc builds the
// process's one MemorySystem from. Plain value.
struct Options {
  // Empty: DefaultModelRepository().
  std::string model_repository;
  std::string grpc_address = "0.0.0.0:8001";
  std::string metrics_address = "0.0.0.0:8002";
  std::string admin_address = "127.0.0.1:8003";
  // KServe v2 HTTP/REST (server/http_service.h); empty: no HTTP listener. Triton's port.
  std::string http_address = "0.0.0.0:8000";
  // Threads serving HTTP connections; a keep-alive connection holds one while it is open,
  // so this bounds the concurrent HTTP clients. 0: 64.
  int http_threads = 0;
  // How long a read from an HTTP client may stall before the connection is dropped
  // (slow or lying clients).
  int http_read_timeout_seconds = 30;
  // Empty: the admin API takes no token (then it must listen on loopback only).
  std::string admin_token_file;
  // "auto" (first GPU, else CPU), "cpu", "cuda", "cuda:N".
  std::string device = "auto";
  // Empty: $NDSERVE_MEMORY_POOL, else "binned".
  std::string memory_pool;
  // Empty: $NDSERVE_MEMORY_LIMIT, else no limit.
  std::string memory_limit;
  // Empty: $NDSERVE_DEBUG_LEVEL, else 0.
  std::string debug_level;
  // Empty: $NDSERVE_MEMORY_THREAD_CACHE, else 4MiB.
  std::string memory_thread_cache;
  // Microseconds the intra-op pool polls before blocking. Empty: $NDSERVE_INTRA_OP_SPIN_US,
  // else kernels::cpu::kDefaultParallelSpinMicros; 0: never poll.
  std::string intra_op_spin_us;
  // Microseconds an idle ModelInfer worker watches for the next call before it sleeps.
  // Empty: $NDSERVE_INFER_WORKER_SPIN_US, else kGpuInferWorkerSpinMicros on a GPU
  // device and 0 (sleep at once) on the CPU.
  std::string infer_worker_spin_us;
  int exit_timeout_seconds = 30;
  ModelControlMode model_control_mode = ModelControlMode::kExplicit;

  // Bounds on what requests make the daemon hold outside the pools (ResolveHostBounds).
  // Sizes as --memory_limit spells them (no percentages).
  std::string max_request_bytes = "256MiB";
  std::string max_response_bytes = "1GiB";
  std::string max_inflight_host_bytes = "4GiB";  // "none": counted, not limited
  // Overload shedding (batchiso): ModelInfer calls accepted but not yet taken by a
  // worker beyond this many are refused at once with UNAVAILABLE; 0: no limit.
  int max_pending_infer = 1024;
  // Threads that decode, enqueue and encode ModelInfer calls (InferenceServiceOptions::
  // workers); 0: one per core. A small pool makes --max_pending_infer bite sooner.
  int infer_workers = 0;
  // TLS per listener (netlife): PEM paths; no cert: plain text; a client CA: mutual TLS.
  TlsFiles grpc_tls;
  TlsFiles admin_tls;
  // The HTTP/REST listener's (--http_tls_*); served by cpp-httplib's SSLServer.
  TlsFiles http_tls;
  // How often the TLS listeners re-read their PEM files, so that a rotated certificate
  // (cert-manager, a renewed Let's Encrypt pair) is served without a restart; 0: read
  // once at start.
  int tls_reload_seconds = 0;
  // Trainer service (docs/design.md §10.1): a training session unused this long is
  // aborted and its memory freed.
  int train_session_idle_seconds = 600;
};

// The host-memory bounds of Options, resolved.
struct HostBounds {
  // gRPC refuses a larger request message (RESOURCE_EXHAUSTED) from its length prefix.
  uint64_t max_request_bytes = 0;
  // ModelInfer refuses to build a larger response (RESOURCE_EXHAUSTED).
  uint64_t max_response_bytes = 0;
  // Requests and responses in flight together; 0: no limit.
  uint64_t max_inflight_host_bytes = 0;
};

// INVALID_ARGUMENT naming the flag for a size that does not parse, is a percentage, or
// (for the request and response caps, which gRPC keeps in an int) exceeds 2147483647.
absl::StatusOr<HostBounds> ResolveHostBounds(const Options& options);

// Reads an environment variable; nullptr when unset. Injectable for tests.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup ProcessEnvironment();

// Checks every option that can be checked without side effects: addresses parse, the
// admin listener is on loopback unless a token file and TLS are given (the token must not
// cross the network in clear text), the TLS files read as PEM, the device and the
// memory settings and the intra-op spin parse, the timeout is not negative, the host bounds parse
// (ResolveHostBounds), the repository is a directory.
// The first problem found is INVALID_ARGUMENT naming the flag (or the environment
// variable a memory setting came from).
absl::Status ValidateOptions(const Options& options, const EnvLookup& env = ProcessEnvironment());

// Flags win over the environment, the environment over built-in defaults. Errors name
// the flag ("--memory_limit") or the variable ("NDSERVE_MEMORY_LIMIT") that held the bad
// text.
absl::StatusOr<MemoryConfig> ResolveMemoryConfig(const Options& options,
                                                 const EnvLookup& env = ProcessEnvironment());

// --intra_op_spin_us, else $NDSERVE_INTRA_OP_SPIN_US, else the kernels' default: an
// integer from 0 to kernels::cpu::kMaxParallelSpinMicros. Anything else is
// INVALID_ARGUMENT naming the flag or the variable.
absl::StatusOr<int> ResolveIntraOpSpinMicros(const Options& options,
                                             const EnvLookup& env = ProcessEnvironment());

// --infer_worker_spin_us, else $NDSERVE_INFER_WORKER_SPIN_US, else the default for the
// daemon's `device` (kGpuInferWorkerSpinMicros on a GPU, 0 on the CPU): an integer from 0
// to kMaxInferWorkerSpinMicros; anything else is INVALID_ARGUMENT naming its source.
absl::StatusOr<int> ResolveInferWorkerSpinMicros(const Options& options, Device device,
                                                 const EnvLookup& env = ProcessEnvironment());

// "auto" becomes cuda:0 when a GPU is present, else cpu:0. A CUDA device that is not
// present is FAILED_PRECONDITION naming --device.
absl::StatusOr<Device> ResolveDevice(absl::string_view text);

// The examples/models repository next to the installed binary
// (<prefix>/share/ndserve/examples/models) or, for a build tree, in the source tree.
// Empty when neither exists.
std::string DefaultModelRepository();

// Host and port of "host:port", "[v6]:port"; "unix:..." addresses have no port.
struct ListenAddress {
  std::string host;
  int port = 0;
  bool is_unix = false;
};
// `flag` names the option in errors.
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text, absl::string_view flag);
// True for 127.0.0.0/8, ::1, localhost and unix sockets: reachable from this host only.
bool IsLoopback(const ListenAddress& address);

// The most an admin token file may hold. Tokens are a few dozen bytes; the cap keeps a
// mistaken path (a log, /dev/zero) from growing memory at start.
inline constexpr size_t kMaxAdminTokenFileBytes = 4096;

// The admin token: the file's contents without surrounding whitespace. Opened without
// blocking and checked before reading, so that a FIFO or a device cannot hang or flood
// the start: anything but a regular file, a file over kMaxAdminTokenFileBytes, an
// unreadable or an empty file is INVALID_ARGUMENT naming --admin_token_file. A file that
// group or others may read is accepted (Kubernetes mounts secrets 0644 by default), and
// `warning`, when given, says so; main logs it.
absl::StatusOr<std::string> ReadAdminToken(const std::string& path, std::string* warning = nullptr);

}  // namespace ndserve

#endif  // NDSERVE_SERVER_OPTIONS_H_
