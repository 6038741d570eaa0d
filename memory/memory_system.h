#ifndef NDSERVE_MEMORY_MEMORY_SYSTEM_H_
#define NDSERVE_MEMORY_MEMORY_SYSTEM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "memory/device.h"
#include "memory/device_pools.h"
#include "memory/manager_levels.h"
#include "memory/memory_config.h"
#include "memory/nd_manager.h"
#include "memory/pool.h"

namespace ndserve {

// One memory system: the pools of every device (a DevicePools built from one
// MemoryConfig, which also fixes the leak-tracking debug level), the system manager of
// every device (the root of its NDManager tree, allocating from that device's pool) and
// the cap-violation counters of the managers below them. Nothing in memory/ is
// process-wide: the daemon builds one MemorySystem from its options and lends it to the
// engine and the server (docs/design.md §3); a test builds as many as it likes, each
// with its own limit, and they share nothing.
//
// Ownership: owns the pools, the system managers and the counters. Pool pointers and
// system managers it hands out are borrowed: the memory system must outlive every
// manager, array and pool user built on it (declare it before the engine and the
// daemon). Destruction order: the destructor first closes every system manager, which
// closes every manager still open below it and frees their arrays into the pools, and
// only then destroys the pools; so no block outlives its pool and a manager never
// frees into a dead one. Arrays handed out stay safe to hold: their use after that is
// the usual "use of freed memory" error.
//
// Thread-safety: every method may be called from any thread; pools and system managers
// are made on first use under one mutex.
class MemorySystem {
 public:
  explicit MemorySystem(const MemoryConfig& config = MemoryConfig());
  ~MemorySystem();
  MemorySystem(const MemorySystem&) = delete;
  MemorySystem& operator=(const MemorySystem&) = delete;

  const MemoryConfig& config() const { return pools_.config(); }
  // Leak tracking of every pool: 0 off, 1 owners, 2 also stack traces.
  int debug_level() const { return pools_.config().debug_level; }

  // The pool of `device`, made on first use. FAILED_PRECONDITION for a CUDA device that
  // is not present.
  absl::StatusOr<Pool*> GetPool(Device device) { return pools_.Get(device); }
  // Every pool made so far, in device order (admin status, metrics, the final log).
  std::vector<Pool*> AllPools() const { return pools_.All(); }
  DevicePools& pools() { return pools_; }
  const DevicePools& pools() const { return pools_; }

  // The root manager of `device`: one per device and memory system, made on first use
  // with the device's pool, never closed before the memory system dies. Errors as
  // GetPool.
  absl::StatusOr<std::shared_ptr<NDManager>> SystemManager(Device device);
  // A new manager directly under the system manager of `device` (model, predictor,
  // trainer). `name` defaults to "<level>/<uid>". INVALID_ARGUMENT for kSystem.
  absl::StatusOr<std::shared_ptr<NDManager>> NewBaseManager(Device device, ManagerLevel level,
                                                            absl::string_view name = {});
  // Every system manager made so far, in device order.
  std::vector<std::shared_ptr<NDManager>> AllSystemManagers() const;

  // Every system manager's tree (the admin DebugDump); `with_blocks` as
  // NDManager::DebugInfo (the memory snapshot).
  std::vector<ManagerNodeInfo> DebugInfoAll(bool with_blocks = false) const;
  std::string DebugDumpAll() const;
  // Live managers, attached arrays and bytes per level, summed over the open managers of
  // this memory system when called, and its cap violations since it was built.
  ManagerLevelSnapshot LevelCounts() const;

 private:
  // Declared first so that it is destroyed last, after the managers closed.
  DevicePools pools_;
  internal::LevelCounters counters_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Device, std::shared_ptr<NDManager>> managers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_MEMORY_SYSTEM_H_
