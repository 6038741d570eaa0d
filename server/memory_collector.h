#ifndef NDSERVE_SERVER_MEMORY_COLLECTOR_H_
#define NDSERVE_SERVER_MEMORY_COLLECTOR_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/model_memory_source.h"

namespace ndserve {

class DevicePools;
class MemorySystem;

// Live managers, attached resources and refused attaches of one manager level
// (system, model, predictor, context, trainer, batch).
struct ManagerLevelSample {
  std::string level;
  std::uint64_t live = 0;
  std::uint64_t resources = 0;
  std::uint64_t cap_violations = 0;
};
using ManagerLevelSource = std::function<std::vector<ManagerLevelSample>()>;

// Builds the memory and manager families of docs/design.md §7 at scrape time from counters
// memory/ keeps: one Pool::Stats() snapshot per pool (a short lock, no walk over live
// blocks), the manager level counters, and the process's resident set from
// /proc/self/statm. Holding no series of its own, it can never drift from the pools.
//
// Families (labels): ndserve_memory_{allocated,cached,reserved,peak_allocated,
// inactive_split}_bytes{device,pool}, ndserve_memory_outstanding_allocations{device,pool},
// ndserve_memory_limit_bytes{device}, ndserve_memory_alloc_total{device,pool,result},
// ndserve_memory_device_{alloc,free}_total{device},
// ndserve_memory_reclaimed_bytes_total{device,pool,reason}, ndserve_memory_oom_total{device},
// ndserve_manager_live{level}, ndserve_manager_resources{level},
// ndserve_manager_cap_violations_total{level}, process_resident_memory_bytes, and with a
// model source ndserve_model_memory_bytes{model,version,device,kind}.
//
// Reads `pools` (not owned; must outlive this object). Thread-safe: Collect may run on
// any number of scrape threads at once.
class MemoryCollector : public prometheus::Collectable {
 public:
  // `managers` may be empty: the manager families are then left out.
  MemoryCollector(const DevicePools* pools, ManagerLevelSource managers);

  std::vector<prometheus::MetricFamily> Collect() const override;

  // Where ndserve_model_memory_bytes comes from (the daemon's engine, once it exists);
  // without one the family is left out.
  void SetModelSource(ModelMemorySource models);

  // The manager source the daemon uses: `memory`.LevelCounts(), which sums each open
  // manager's own counters (a walk over managers, not over arrays or blocks).
  static std::vector<ManagerLevelSample> NDManagerLevels(const MemorySystem& memory);

  // Resident set size of this process, 0 where /proc is unavailable.
  static std::uint64_t ResidentBytes();

 private:
  const DevicePools* const pools_;
  const ManagerLevelSource managers_;
  mutable absl::Mutex models_mu_;
  ModelMemorySource models_ ABSL_GUARDED_BY(models_mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_MEMORY_COLLECTOR_H_
