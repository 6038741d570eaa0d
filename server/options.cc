#include "server/options.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/parallel_spin.h"
#include "memory/cuda_runtime.h"
#include "memory/pool.h"

namespace ndserve {
namespace {

namespace fs = std::filesystem;

// The text of one memory setting and where it came from, flag before environment.
struct Setting {
  std::string text;
  std::string source;  // "--memory_pool" or "NDSERVE_MEMORY_POOL"; empty when unset
};

Setting Pick(const std::string& flag_value, absl::string_view flag_name, const char* env_name,
             const EnvLookup& env) {
  if (!flag_value.empty()) return {flag_value, absl::StrCat("--", flag_name)};
  if (const char* v = env ? env(env_name) : nullptr; v != nullptr && *v != '\0') {
    return {v, env_name};
  }
  return {};
}

absl::Status Invalid(absl::string_view flag, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "='", text, "': ", why));
}

// A spin budget from `s` (set): microseconds from 0 to `max`, else INVALID_ARGUMENT
// naming the flag or variable it came from.
absl::StatusOr<int> ParseSpinMicros(const Setting& s, int max) {
  int micros = 0;
  if (!absl::SimpleAtoi(s.text, &micros) || micros < 0 || micros > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        s.source, "='", s.text, "': microseconds from 0 (never spin) to ", max, " expected"));
  }
  return micros;
}

}  // namespace

absl::string_view ModelControlModeName(ModelControlMode mode) {
  return mode == ModelControlMode::kNone ? "none" : "explicit";
}

bool AbslParseFlag(absl::string_view text, ModelControlMode* mode, std::string* error) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lower == "explicit") {
    *mode = ModelControlMode::kExplicit;
    return true;
  }
  if (lower == "none") {
    *mode = ModelControlMode::kNone;
    return true;
  }
  *error = "expected 'explicit' or 'none'";
  return false;
}

std::string AbslUnparseFlag(ModelControlMode mode) {
  return std::string(ModelControlModeName(mode));
}

EnvLookup ProcessEnvironment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text, absl::string_view flag) {
  ListenAddress address;
  if (absl::StartsWith(text, "unix:")) {
    if (text.size() == 5) return Invalid(flag, text, "a unix socket address needs a path");
    address.is_unix = true;
    address.host = std::string(text.substr(5));
    return address;
  }
  absl::string_view host;
  absl::string_view port;
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Invalid(flag, text, "expected [ipv6-address]:port");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return Invalid(flag, text, "expected host:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (absl::StrContains(host, ':')) {
      return Invalid(flag, text, "write IPv6 addresses in brackets: [::1]:8003");
    }
  }
  if (host.empty()) return Invalid(flag, text, "the host is empty (use 0.0.0.0 for all)");
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number < 0 || port_number > 65535) {
    return Invalid(flag, text, "the port must be a number from 0 to 65535");
  }
  address.host = std::string(host);
  address.port = port_number;
  return address;
}

bool IsLoopback(const ListenAddress& address) {
  if (address.is_unix) return true;
  const std::string host = absl::AsciiStrToLower(address.host);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

absl::StatusOr<MemoryConfig> ResolveMemoryConfig(const Options& options, const EnvLookup& env) {
  MemoryConfig config;
  if (Setting s = Pick(options.memory_pool, "memory_pool", kPoolEnv, env); !s.source.empty()) {
    absl::StatusOr<PoolKind> kind = ParsePoolKind(s.text);
    if (!kind.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.source, "='", s.text, "': ", kind.status().message()));
    }
    config.pool = *kind;
  }
  if (Setting s = Pick(options.memory_limit, "memory_limit", kLimitEnv, env); !s.source.empty()) {
    absl::StatusOr<MemoryLimit> limit = ParseMemoryLimit(s.text, s.source);
    if (!limit.ok()) return limit.status();
    config.limit = *limit;
  }
  if (Setting s = Pick(options.debug_level, "debug_level", kDebugLevelEnv, env);
      !s.source.empty()) {
    absl::StatusOr<int> level = ParseDebugLevel(s.text, s.source);
    if (!level.ok()) return level.status();
    config.debug_level = *level;
  }
  if (Setting s = Pick(options.memory_thread_cache, "memory_thread_cache", kThreadCacheEnv, env);
      !s.source.empty()) {
    absl::StatusOr<std::size_t> bytes = ParseThreadCacheBytes(s.text, s.source);
    if (!bytes.ok()) return bytes.status();
    config.thread_cache_bytes = *bytes;
  }
  return config;
}

absl::StatusOr<int> ResolveIntraOpSpinMicros(const Options& options, const EnvLookup& env) {
  const Setting s = Pick(options.intra_op_spin_us, "intra_op_spin_us", kIntraOpSpinEnv, env);
  if (s.source.empty()) return kernels::cpu::kDefaultParallelSpinMicros;
  return ParseSpinMicros(s, kernels::cpu::kMaxParallelSpinMicros);
}

absl::StatusOr<int> ResolveInferWorkerSpinMicros(const Options& options, Device device,
                                                 const EnvLookup& env) {
  const Setting s =
      Pick(options.infer_worker_spin_us, "infer_worker_spin_us", kInferWorkerSpinEnv, env);
  if (s.source.empty()) return device.is_cuda() ? kGpuInferWorkerSpinMicros : 0;
  return ParseSpinMicros(s, kMaxInferWorkerSpinMicros);
}

namespace {

// A byte size flag. `allow_none`: "none" (or empty) means no limit, returned as 0.
absl::StatusOr<uint64_t> ParseByteFlag(const std::string& text, absl::string_view flag,
                                       bool allow_none, uint64_t max) {
  const std::string source = absl::StrCat("--", flag);
  absl::StatusOr<MemoryLimit> parsed = ParseMemoryLimit(text, source);
  if (!parsed.ok()) return parsed.status();
  if (parsed->unlimited) {
    if (allow_none) return 0;
    return Invalid(flag, text, "a size is required (e.g. 64MiB)");
  }
  if (parsed->fraction != 0) return Invalid(flag, text, "a size is required, not a percentage");
  if (parsed->bytes > max) {
    return Invalid(flag, text, absl::StrCat("must be at most ", max, " bytes"));
  }
  return parsed->bytes;
}

// gRPC keeps message size limits in an int.
constexpr uint64_t kMaxGrpcMessageBytes = 2147483647;

}  // namespace

absl::StatusOr<HostBounds> ResolveHostBounds(const Options& options) {
  HostBounds bounds;
  absl::StatusOr<uint64_t> v = ParseByteFlag(options.max_request_bytes, "max_request_bytes",
                                             /*allow_none=*/false, kMaxGrpcMessageBytes);
  if (!v.ok()) return v.status();
  bounds.max_request_bytes = *v;
  v = ParseByteFlag(options.max_response_bytes, "max_response_bytes", /*allow_none=*/false,
                    kMaxGrpcMessageBytes);
  if (!v.ok()) return v.status();
  bounds.max_response_bytes = *v;
  v = ParseByteFlag(options.max_inflight_host_bytes, "max_inflight_host_bytes",
                    /*allow_none=*/true, UINT64_MAX);
  if (!v.ok()) return v.status();
  bounds.max_inflight_host_bytes = *v;
  return bounds;
}

absl::StatusOr<Device> ResolveDevice(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  const int gpus = CudaDeviceCount();
  if (lower == "auto") return gpus > 0 ? Device::Cuda(0) : Device::Cpu();
  absl::StatusOr<Device> device = ParseDevice(lower);
  if (!device.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device='", text, "': ", device.status().message()));
  }
  if (device->is_cuda() && device->ordinal >= gpus) {
    return absl::FailedPreconditionError(
        absl::StrCat("--device='", text, "': no such device (", gpus, " CUDA device(s) present",
                     CudaBuilt() ? "" : "; this build has no CUDA backend", ")"));
  }
  return *device;
}

std::string DefaultModelRepository() {
  std::error_code ec;
  std::vector<fs::path> candidates;
  // Installed layout: <prefix>/bin/ndserved next to <prefix>/share/ndserve/.
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / "share/ndserve/examples/models");
  }
#ifdef NDSERVE_INSTALL_DATADIR
  candidates.push_back(fs::path(NDSERVE_INSTALL_DATADIR) / "examples/models");
#endif
#ifdef NDSERVE_SOURCE_DIR
  candidates.push_back(fs::path(NDSERVE_SOURCE_DIR) / "examples/models");
#endif
  for (const fs::path& p : candidates) {
    if (fs::is_directory(p, ec)) return p.lexically_normal().string();
  }
  return "";
}

absl::Status ValidateOptions(const Options& options, const EnvLookup& env) {
  absl::StatusOr<ListenAddress> grpc = ParseListenAddress(options.grpc_address, "grpc_address");
  if (!grpc.ok()) return grpc.status();
  absl::StatusOr<ListenAddress> metrics =
      ParseListenAddress(options.metrics_address, "metrics_address");
  if (!metrics.ok()) return metrics.status();
  if (metrics->is_unix) {
    return Invalid("metrics_address", options.metrics_address,
                   "the metrics endpoint is HTTP over TCP; unix sockets are not supported");
  }
  if (!options.http_address.empty()) {
    absl::StatusOr<ListenAddress> http = ParseListenAddress(options.http_address, "http_address");
    if (!http.ok()) return http.status();
    if (http->is_unix) {
      return Invalid("http_address", options.http_address,
                     "the HTTP endpoint is served over TCP; unix sockets are not supported");
    }
  }
  if (options.http_threads < 0) {
    return Invalid("http_threads", std::to_string(options.http_threads), "must not be negative");
  }
  if (options.http_read_timeout_seconds <= 0) {
    return Invalid("http_read_timeout_seconds", std::to_string(options.http_read_timeout_seconds),
                   "must be positive");
  }
  absl::StatusOr<ListenAddress> admin = ParseListenAddress(options.admin_address, "admin_address");
  if (!admin.ok()) return admin.status();
  if (!IsLoopback(*admin) && options.admin_token_file.empty()) {
    return Invalid("admin_address", options.admin_address,
                   "the admin API may listen beyond loopback only with --admin_token_file "
                   "(it can reclaim memory and dump internals)");
  }
  if (!IsLoopback(*admin) && !options.admin_tls.enabled()) {
    return Invalid("admin_address", options.admin_address,
                   "the admin API may listen beyond loopback only with TLS "
                   "(--admin_tls_cert and --admin_tls_key): its bearer token must not cross "
                   "the network in clear text");
  }
  if (!options.admin_token_file.empty()) {
    absl::StatusOr<std::string> token = ReadAdminToken(options.admin_token_file);
    if (!token.ok()) return token.status();
  }
  if (absl::Status s = ValidateTlsFiles(options.grpc_tls, "grpc"); !s.ok()) return s;
  if (absl::Status s = ValidateTlsFiles(options.admin_tls, "admin"); !s.ok()) return s;
  if (absl::Status s = ValidateTlsFiles(options.http_tls, "http"); !s.ok()) return s;
  if (options.http_tls.enabled() && options.http_address.empty()) {
    return Invalid("http_tls_cert", options.http_tls.cert,
                   "the HTTP listener is off (--http_address is empty)");
  }
  if (absl::AsciiStrToLower(options.device) != "auto") {
    absl::StatusOr<Device> device = ParseDevice(options.device);
    if (!device.ok()) {
      return Invalid("device", options.device, absl::StrCat(device.status().message(), " or auto"));
    }
  }
  if (absl::StatusOr<MemoryConfig> memory = ResolveMemoryConfig(options, env); !memory.ok()) {
    return memory.status();
  }
  if (absl::StatusOr<int> spin = ResolveIntraOpSpinMicros(options, env); !spin.ok()) {
    return spin.status();
  }
  if (absl::StatusOr<int> spin = ResolveInferWorkerSpinMicros(options, Device::Cpu(), env);
      !spin.ok()) {
    return spin.status();
  }
  if (options.exit_timeout_seconds < 0) {
    return Invalid("exit_timeout_seconds", std::to_string(options.exit_timeout_seconds),
                   "must not be negative");
  }
  if (absl::StatusOr<HostBounds> bounds = ResolveHostBounds(options); !bounds.ok()) {
    return bounds.status();
  }
  if (options.tls_reload_seconds < 0) {
    return Invalid("tls_reload_seconds", std::to_string(options.tls_reload_seconds),
                   "must not be negative (0: no reload)");
  }
  if (options.infer_workers < 0 || options.infer_workers > 4096) {
    return Invalid("infer_workers", std::to_string(options.infer_workers),
                   "must be 0 (one per core) to 4096");
  }
  if (options.train_session_idle_seconds <= 0) {
    return Invalid("train_session_idle_seconds", std::to_string(options.train_session_idle_seconds),
                   "must be positive");
  }
  if (options.max_pending_infer < 0) {
    return Invalid("max_pending_infer", std::to_string(options.max_pending_infer),
                   "must not be negative (0: no limit)");
  }
  if (!options.model_repository.empty()) {
    std::error_code ec;
    if (!fs::is_directory(options.model_repository, ec)) {
      return Invalid("model_repository", options.model_repository, "not a directory");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAdminToken(const std::string& path, std::string* warning) {
  auto error = [&path](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--admin_token_file='", path, "': ", why));
  };
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return error(absl::StrCat("cannot be read (", std::strerror(errno), ")"));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return error(absl::StrCat("cannot stat (", std::strerror(errno), ")"));
  if (!S_ISREG(st.st_mode)) return error("not a regular file");
  if (st.st_size > static_cast<off_t>(kMaxAdminTokenFileBytes)) {
    return error(absl::StrCat("holds ", st.st_size, " bytes; a token file may hold at most ",
                              kMaxAdminTokenFileBytes));
  }
  // One byte more than allowed, so that a file that grew since fstat is still caught.
  std::string contents(kMaxAdminTokenFileBytes + 1, '\0');
  size_t filled = 0;
  while (filled < contents.size()) {
    const ssize_t n = ::read(fd, contents.data() + filled, contents.size() - filled);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return error(absl::StrCat("cannot be read (", std::strerror(errno), ")"));
    if (n == 0) break;
    filled += static_cast<size_t>(n);
  }
  if (filled > kMaxAdminTokenFileBytes) {
    return error(absl::StrCat("holds more than ", kMaxAdminTokenFileBytes, " bytes"));
  }
  contents.resize(filled);
  std::string token(absl::StripAsciiWhitespace(contents));
  if (token.empty()) return error("the file holds no token");
  if (warning != nullptr) {
    warning->clear();
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
      *warning = absl::StrCat("--admin_token_file='", path, "' is accessible to group or others ",
                              "(mode ", absl::StrFormat("%04o", st.st_mode & 07777),
                              "); chmod 600 it so that only the daemon's user can read the token");
    }
  }
  return token;
}

}  // namespace ndserve
