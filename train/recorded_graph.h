#ifndef NDSERVE_TRAIN_RECORDED_GRAPH_H_
#define NDSERVE_TRAIN_RECORDED_GRAPH_H_

// A loaded engine Graph replayed through the autograd ops, so that a served model can
// be fine-tuned (docs/design.md §10). The trainable initializers become parameters (a
// copy of their bytes plus a gradient, in the trainer manager); the others become
// constants there. Every forward records into the step's batch manager.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/graph.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train {

class RecordedGraph {
 public:
  // `trainable` names initializers (empty: every FP32 initializer). INVALID_ARGUMENT
  // for an unknown or non-FP32 name; UNIMPLEMENTED (naming the node) for an op without
  // a backward here. The graph must still hold its initializer bytes.
  static absl::StatusOr<RecordedGraph> Create(const engine::Graph& graph,
                                              absl::Span<const std::string> trainable,
                                              NDManager& trainer);

  // Runs the graph on `inputs` (parallel to the graph's inputs) and returns the values
  // named in `outputs` (any value of the graph, e.g. the logits before a final Softmax;
  // empty: the graph outputs). Nodes after the last one needed are not run.
  absl::StatusOr<std::vector<Variable>> Forward(NDManager& batch, absl::Span<const NDArray> inputs,
                                                absl::Span<const std::string> outputs = {}) const;

  const std::vector<Variable>& parameters() const { return parameters_; }
  const std::vector<std::string>& parameter_names() const { return parameter_names_; }

 private:
  explicit RecordedGraph(const engine::Graph& graph) : graph_(&graph) {}

  const engine::Graph* graph_;
  // Initializer index -> its variable (parameter or constant).
  std::vector<Variable> initializers_;
  std::vector<Variable> parameters_;
  std::vector<std::string> parameter_names_;
};

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_RECORDED_GRAPH_H_
