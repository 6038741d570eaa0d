#ifndef NDSERVE_LOADTEST_MEMORY_PROBE_H_
#define NDSERVE_LOADTEST_MEMORY_PROBE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ndserve::loadtest {

// One device pool of the daemon at one moment.
struct PoolMemory {
  std::string device;
  std::string pool;
  std::uint64_t allocated_bytes = 0;
  std::uint64_t cached_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  std::uint64_t outstanding_allocations = 0;
};

// The daemon's memory at one moment: its pools (when a pool source is configured) and
// its resident set size (when an RSS source is).
struct MemorySnapshot {
  std::vector<PoolMemory> pools;
  std::optional<std::uint64_t> rss_bytes;

  std::uint64_t allocated_bytes() const;
  std::uint64_t cached_bytes() const;
  std::uint64_t reserved_bytes() const;
};

// Where a MemoryProbe reads from. Empty / zero fields are sources not used.
struct MemoryProbeOptions {
  // MemoryAdmin.GetMemoryStatus: exact pool counters.
  std::string admin_address;
  // File holding the admin bearer token (the daemon's --admin_token_file).
  std::string admin_token_file;
  // host:port of the daemon's Prometheus endpoint: pool gauges when there is no admin
  // address, and process_resident_memory_bytes when there is no pid.
  std::string metrics_address;
  // A local daemon's pid: RSS from /proc/<pid>/status (VmRSS).
  int pid = 0;
};

// Samples the daemon's memory between (or during) load runs. Thread-compatible: one
// thread at a time.
class MemoryProbe {
 public:
  // Fails when no source is configured or the token file cannot be read.
  static absl::StatusOr<std::unique_ptr<MemoryProbe>> Create(const MemoryProbeOptions& options);
  virtual ~MemoryProbe() = default;

  // Reads every configured source; fails when any of them fails.
  virtual absl::StatusOr<MemorySnapshot> Take() = 0;
  // Which sources Take() reads, for the report, e.g. "admin 127.0.0.1:8003, VmRSS pid 42".
  virtual std::string Describe() const = 0;
  virtual bool has_pools() const = 0;
  virtual bool has_rss() const = 0;
};

// Sums a Prometheus text exposition: the pools from ndserve_memory_{allocated,cached,
// reserved}_bytes and ndserve_memory_outstanding_allocations, and
// process_resident_memory_bytes. Exposed for tests.
MemorySnapshot ParseMetricsText(const std::string& text);

// GET http://<address>/metrics over plain HTTP/1.0; returns the body.
absl::StatusOr<std::string> FetchMetrics(const std::string& address, int timeout_ms);

}  // namespace ndserve::loadtest

#endif  // NDSERVE_LOADTEST_MEMORY_PROBE_H_
