#include "memory/memory_system.h"

#include <atomic>
#include <cstdlib>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/logging.h"

namespace ndserve {
namespace {

struct MemorySystem {
  absl::Mutex mu;
  bool configured ABSL_GUARDED_BY(mu) = false;
  MemoryConfig config ABSL_GUARDED_BY(mu);
  // Published once, read lock-free afterwards.
  std::atomic<DevicePools*> pools{nullptr};
};

MemorySystem& System() {
  static MemorySystem* system = new MemorySystem();
  return *system;
}

bool SameConfig(const MemoryConfig& a, const MemoryConfig& b) {
  return a.pool == b.pool && a.debug_level == b.debug_level &&
         a.thread_cache_bytes == b.thread_cache_bytes &&
         a.limit.unlimited == b.limit.unlimited && a.limit.bytes == b.limit.bytes &&
         a.limit.fraction == b.limit.fraction;
}

}  // namespace

absl::Status ConfigureMemory(const MemoryConfig& config) {
  MemorySystem& system = System();
  absl::MutexLock lock(&system.mu);
  if (DevicePools* pools = system.pools.load(std::memory_order_acquire)) {
    if (SameConfig(pools->config(), config)) return absl::OkStatus();
    return absl::FailedPreconditionError(
        "ConfigureMemory called after the memory pools were built with another configuration; "
        "call it before the first allocation");
  }
  system.config = config;
  system.configured = true;
  return absl::OkStatus();
}

absl::StatusOr<DevicePools*> TryGlobalPools() {
  MemorySystem& system = System();
  if (DevicePools* pools = system.pools.load(std::memory_order_acquire)) return pools;
  absl::MutexLock lock(&system.mu);
  if (DevicePools* pools = system.pools.load(std::memory_order_acquire)) return pools;
  MemoryConfig config = system.config;
  if (!system.configured) {
    absl::StatusOr<MemoryConfig> from_env = MemoryConfigFromEnvironment();
    if (!from_env.ok()) return from_env.status();
    config = *from_env;
  }
  DevicePools* pools = new DevicePools(config);  // never destroyed, see the header
  system.pools.store(pools, std::memory_order_release);
  return pools;
}

DevicePools& GlobalPools() {
  absl::StatusOr<DevicePools*> pools = TryGlobalPools();
  if (!pools.ok()) {
    LOG(ERROR) << "bad memory configuration: " << pools.status().message();
    std::abort();
  }
  return **pools;
}

absl::StatusOr<Pool*> GlobalPool(Device device) {
  absl::StatusOr<DevicePools*> pools = TryGlobalPools();
  if (!pools.ok()) return pools.status();
  return (*pools)->Get(device);
}

}  // namespace ndserve
