#ifndef NDSERVE_ENGINE_MODEL_MEMORY_H_
#define NDSERVE_ENGINE_MODEL_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "memory/device.h"
#include "memory/manager_levels.h"
#include "memory/nd_manager.h"

namespace ndserve::engine {

// What one loaded model version holds on one device, of one kind (docs/design.md §2,
// "Exact memory per model"):
//   parameters - the model manager's arrays (initializers);
//   workspace  - what its predictors and the requests running in them hold;
//   state      - anything else under the model manager (training scopes, captured state).
// Bytes are the pool's rounded block sizes, so freeing them drops the pool's allocated
// bytes by exactly this much.
struct ModelMemoryUsage {
  Device device;
  std::string kind;
  std::uint64_t bytes = 0;
};

inline constexpr absl::string_view kMemoryKindParameters = "parameters";
inline constexpr absl::string_view kMemoryKindWorkspace = "workspace";
inline constexpr absl::string_view kMemoryKindState = "state";

// The kind a manager level's arrays count as.
absl::string_view MemoryKindOf(ManagerLevel level);

// Sums a model manager's subtree (NDManager::DebugInfo) per device and kind: every kind
// for every device in the tree, zeros included, so a loaded model always reports the
// same rows; nothing for a closed manager.
std::vector<ModelMemoryUsage> SumModelMemory(const ManagerNodeInfo& model_tree);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_MODEL_MEMORY_H_
