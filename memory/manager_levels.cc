#include "memory/manager_levels.h"

namespace ndserve {

absl::string_view ManagerLevelName(ManagerLevel level) {
  switch (level) {
    case ManagerLevel::kSystem:
      return "system";
    case ManagerLevel::kModel:
      return "model";
    case ManagerLevel::kPredictor:
      return "predictor";
    case ManagerLevel::kContext:
      return "context";
    case ManagerLevel::kTrainer:
      return "trainer";
    case ManagerLevel::kBatch:
      return "batch";
  }
  return "unknown";
}

namespace internal {

ManagerLevelSnapshot LevelCounters::Read() const {
  ManagerLevelSnapshot snapshot;
  for (int i = 0; i < kNumManagerLevels; ++i) {
    snapshot.levels[i].cap_violations = slots_[i].cap_violations.load(std::memory_order_relaxed);
  }
  return snapshot;
}

}  // namespace internal
}  // namespace ndserve
