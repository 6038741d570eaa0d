#include "engine/graph.h"

#include <utility>

#include "engine/graph_builder.h"

namespace ndserve::engine {

bool IsShapeOnlyOp(kernels::OpKind op) { return kernels::GetOpInfo(op).alias; }

absl::StatusOr<Graph> Graph::Build(GraphDef def) { return GraphBuilder(std::move(def)).Build(); }

int Graph::FindValue(absl::string_view name) const {
  for (int i = 0; i < static_cast<int>(values_.size()); ++i) {
    if (values_[i].name == name) return i;
  }
  return kNoValue;
}

uint64_t Graph::InitializerBytes() const {
  uint64_t total = 0;
  for (const Initializer& init : initializers_) {
    total += static_cast<uint64_t>(kernels::NumElements(init.shape)) * DTypeSize(init.dtype);
  }
  return total;
}

bool Graph::has_host_nodes() const {
  for (const Node& node : nodes_) {
    if (node.on_host) return true;
  }
  return false;
}

void Graph::ReleaseInitializerBytes() {
  for (Initializer& init : initializers_) {
    if (!init.read_on_host) std::string().swap(init.bytes);
  }
}

}  // namespace ndserve::engine
