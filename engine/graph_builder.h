#ifndef NDSERVE_ENGINE_GRAPH_BUILDER_H_
#define NDSERVE_ENGINE_GRAPH_BUILDER_H_

// Graph::Build's passes (see graph.h for what they do to a graph). Internal to engine/.

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/graph.h"

namespace ndserve::engine {

// Builds one Graph from one GraphDef; each pass is a method that does one thing and the
// passes run in the order Build lists. Single use; not thread-safe.
class GraphBuilder {
 public:
  explicit GraphBuilder(GraphDef def) : def_(std::move(def)) {}
  absl::StatusOr<Graph> Build();

 private:
  // A node after op resolution: its inputs split into data and host inputs.
  struct Resolved {
    std::string name;
    std::string where;  // "node 'fc0' (Gemm)", for errors
    kernels::OpKind op;
    kernels::AttrMap attr_map;
    int num_inputs = 0;                                    // as the file lists them
    std::vector<std::string> inputs;                       // data inputs, non-empty names
    std::vector<std::pair<int, std::string>> host_inputs;  // present ones, by position
    std::vector<std::string> outputs;                      // "" for ignored ones
    kernels::OpAttrs attrs;
    std::vector<std::pair<int, std::string>> dynamic_host_inputs;
    std::vector<std::optional<kernels::HostValue>> host_values;
    std::vector<std::pair<std::string, bool>> guards;  // NodeDef::guards
    int loop = -1;                                     // NodeDef::loop
    // A Loop node: its LoopDef::id, its carried value count and its scan outputs.
    int loop_id = -1;
    int carried = 0;
    std::vector<ScanOutput> scans;
    bool on_host = false;
    bool folded = false;
  };

  absl::Status CheckOpset() const;
  absl::Status IndexInitializersAndInputs();
  absl::Status RemoveIdentityNodes();
  absl::Status ResolveOps();
  absl::Status CheckInputsDefinedAndOrder();
  absl::Status FoldConstants();
  void PlaceShapeArithmeticOnHost();
  absl::Status BuildAttributes();
  absl::StatusOr<Graph> MakeGraph();
  // MakeGraph's last steps: Node::loop and ValueSource::kLoop indices from LoopDef ids to
  // node indices, and each Loop's LoopBody; then Graph::ReleasedAfter.
  static absl::Status LinkLoops(Graph& g, std::vector<LoopBody> bodies,
                                absl::Span<const int> loop_node);
  static void ComputeLiveness(Graph& g);

  bool IsInitializer(const std::string& name) const { return init_index_.contains(name); }
  // A name a Loop sets per iteration (LoopDef).
  bool IsLoopValue(const std::string& name) const { return loop_values_.contains(name); }
  // Reads the Loop attributes (graph.h LoopDef) of `rn` into its fields.
  absl::Status ResolveLoop(Resolved& rn);
  bool IsHostValue(const std::string& name) const;
  // The host values of `rn`'s host inputs that are initializers, by input position.
  absl::StatusOr<std::vector<std::optional<kernels::HostValue>>> ConstantHostValues(
      const Resolved& rn) const;
  // Runs `rn` on the CPU over initializers; false when it is not worth folding.
  absl::StatusOr<bool> Fold(Resolved& rn);

  GraphDef def_;
  absl::flat_hash_map<std::string, int> init_index_;
  absl::flat_hash_set<std::string> input_names_;
  // Names Loops set per iteration -> whether the value is a host one (the iteration
  // number and the condition) rather than a carried value.
  absl::flat_hash_map<std::string, bool> loop_values_;
  std::vector<TensorSpec> inputs_;
  std::vector<Resolved> nodes_;
  absl::flat_hash_map<std::string, int> producer_;  // value name -> index into nodes_
  std::vector<int> order_;                          // topological
  int folded_ = 0;
  bool shapes_from_values_ = false;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_GRAPH_BUILDER_H_
