#include "engine/model_memory.h"

#include <map>
#include <utility>

namespace ndserve::engine {
namespace {

void Accumulate(const ManagerNodeInfo& node,
                std::map<std::pair<Device, absl::string_view>, std::uint64_t>* sums) {
  (*sums)[{node.device, MemoryKindOf(node.level)}] += node.block_bytes;
  for (const ManagerNodeInfo& child : node.children) Accumulate(child, sums);
}

}  // namespace

absl::string_view MemoryKindOf(ManagerLevel level) {
  switch (level) {
    case ManagerLevel::kModel:
      return kMemoryKindParameters;
    case ManagerLevel::kPredictor:
    case ManagerLevel::kContext:
      return kMemoryKindWorkspace;
    default:
      return kMemoryKindState;
  }
}

std::vector<ModelMemoryUsage> SumModelMemory(const ManagerNodeInfo& model_tree) {
  std::vector<ModelMemoryUsage> out;
  if (model_tree.closed) return out;
  std::map<std::pair<Device, absl::string_view>, std::uint64_t> sums;
  for (absl::string_view kind : {kMemoryKindParameters, kMemoryKindWorkspace, kMemoryKindState}) {
    sums[{model_tree.device, kind}] = 0;
  }
  Accumulate(model_tree, &sums);
  out.reserve(sums.size());
  for (const auto& [key, bytes] : sums) {
    out.push_back(ModelMemoryUsage{key.first, std::string(key.second), bytes});
  }
  return out;
}

}  // namespace ndserve::engine
