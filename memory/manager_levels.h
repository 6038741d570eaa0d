#ifndef NDSERVE_MEMORY_MANAGER_LEVELS_H_
#define NDSERVE_MEMORY_MANAGER_LEVELS_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace ndserve {

// Where a manager sits in the scope tree (docs/design.md §2). The level is a tag for metrics
// and dumps; it does not change a manager's behaviour (except that only the system
// manager refuses Close).
enum class ManagerLevel : std::uint8_t {
  kSystem,     // one per device and MemorySystem, closed only with it
  kModel,      // a model's parameters
  kPredictor,  // one per model instance and device; capped
  kContext,    // one per request (PredictorContext), and sub-scopes of it
  kTrainer,    // training: parameters and optimizer state
  kBatch,      // training: one per step
};

inline constexpr int kNumManagerLevels = static_cast<int>(ManagerLevel::kBatch) + 1;

// "system", "model", "predictor", "context", "trainer", "batch": metric label values.
absl::string_view ManagerLevelName(ManagerLevel level);

// Counts for one level at one moment.
struct ManagerLevelCounts {
  std::int64_t live_managers = 0;       // opened and not yet closed
  std::int64_t attached_resources = 0;  // arrays held by managers of this level
  std::int64_t attached_bytes = 0;      // their bytes (as created, before pool rounding)
  std::int64_t cap_violations = 0;      // attaches refused by a capped manager, since start
};

// One reading of every level, indexed by ManagerLevel. Not a single atomic snapshot
// across levels: each number is exact for the moment it was read.
struct ManagerLevelSnapshot {
  std::array<ManagerLevelCounts, kNumManagerLevels> levels;

  const ManagerLevelCounts& operator[](ManagerLevel level) const {
    return levels[static_cast<int>(level)];
  }
  ManagerLevelCounts& operator[](ManagerLevel level) { return levels[static_cast<int>(level)]; }
};

namespace internal {

// The per-level counter that only grows: cap violations, one set per MemorySystem,
// which owns it; every manager of that system's trees points at it. The gauges (live
// managers, attached arrays and bytes) change on every request and every Create; shared
// atomics for them would put contended read-modify-writes on those paths, so each
// manager keeps its own numbers under its lock and MemorySystem::LevelCounts() sums the
// open trees when someone asks (a metrics scrape), which is exact: every open manager is
// in a tree and a closed one holds nothing. Thread-safe: relaxed atomics, each on its
// own cache line.
class LevelCounters {
 public:
  void CapViolation(ManagerLevel level) {
    At(level).cap_violations.fetch_add(1, std::memory_order_relaxed);
  }

  // cap_violations filled in; the gauges left at zero.
  ManagerLevelSnapshot Read() const;

 private:
  struct alignas(64) Slot {
    std::atomic<std::int64_t> cap_violations{0};
  };
  Slot& At(ManagerLevel level) { return slots_[static_cast<int>(level)]; }

  std::array<Slot, kNumManagerLevels> slots_;
};

}  // namespace internal
}  // namespace ndserve

#endif  // NDSERVE_MEMORY_MANAGER_LEVELS_H_
