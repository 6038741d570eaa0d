#ifndef NDSERVE_ENGINE_FUSION_UTIL_H_
#define NDSERVE_ENGINE_FUSION_UTIL_H_

// What the load-time rewrites of engine/fusion.h share about editing a GraphDef.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/graph.h"

namespace ndserve::engine::fusion {

inline bool IsDefaultDomain(const NodeDef& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// A default-domain `op` node with exactly `inputs` inputs, all present, and `outputs`
// outputs, the first of them used.
inline bool IsNode(const NodeDef& n, absl::string_view op, std::size_t inputs,
                   std::size_t outputs) {
  if (n.op_type != op || !IsDefaultDomain(n) || n.inputs.size() != inputs ||
      n.outputs.size() != outputs) {
    return false;
  }
  for (const std::string& in : n.inputs) {
    if (in.empty()) return false;
  }
  return !n.outputs[0].empty();
}

// Removes the nodes marked in `removed`, keeping the others in order.
inline void DropNodes(GraphDef* def, const std::vector<bool>& removed) {
  std::vector<NodeDef> kept;
  for (std::size_t i = 0; i < def->nodes.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(def->nodes[i]));
  }
  def->nodes = std::move(kept);
}

}  // namespace ndserve::engine::fusion

#endif  // NDSERVE_ENGINE_FUSION_UTIL_H_
