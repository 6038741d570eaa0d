#ifndef NDSERVE_ENGINE_GRAPH_H_
#define NDSERVE_ENGINE_GRAPH_H_

// The engine's graph IR: what the ONNX loader produces and the predictor runs. No
// protobuf types here; onnx_loader.cc translates an onnx::ModelProto into a GraphDef,
// and Graph::Build validates it and orders it.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/tensor_spec.h"
#include "kernels/node_attrs.h"
#include "kernels/op_attrs.h"
#include "kernels/op_kind.h"
#include "kernels/tensor_view.h"
#include "memory/dtype.h"

namespace ndserve::engine {

// A constant tensor of the model, as host bytes (little-endian, C order, exactly
// numel * DTypeSize bytes). std::string so the loader can move the protobuf's raw_data
// in without copying 50 MB embedding tables.
struct Initializer {
  std::string name;
  DType dtype = DType::kFp32;
  kernels::Shape shape;
  std::string bytes;
  // A host-placed node reads it as data: its bytes stay after the upload
  // (ReleaseInitializerBytes keeps them), since host kernels cannot read device memory.
  bool read_on_host = false;
};

// One node as the file states it, before validation.
struct NodeDef {
  std::string name;  // may be empty in the file
  std::string op_type;
  std::string domain;
  std::vector<std::string> inputs;   // "" marks an absent optional input
  std::vector<std::string> outputs;  // "" marks an unused optional output
  kernels::AttrMap attrs;
  // A node of an If branch the loader inlined (engine/onnx_loader.cc): it runs only when
  // each named condition (a BOOL value of one element) holds the given value.
  std::vector<std::pair<std::string, bool>> guards;
  // A node of a Loop body the loader inlined: the LoopDef::id of the innermost Loop
  // whose body holds it; -1 outside every loop. It runs only from its Loop, once per
  // iteration.
  int loop = -1;
};

// A Loop the loader inlined (engine/onnx_loader.cc): the names its body reads that the
// engine sets before each iteration. The Loop node itself is a NodeDef of op "Loop" with
// inputs [trip count, cond, initial values..., body cond, body carried values..., body
// scan outputs..., outer values the body reads...] and the attributes
// kLoopIdAttr, kLoopCarriedAttr and, per scan output, kScanAxesAttr, kScanNewAxisAttr,
// kScanDTypesAttr (ONNX element types, 0 unknown) and kScanDimsAttr (per output its rank
// then its dims, -1 unknown; rank -1 unknown): the declarations, for a loop that runs no
// iteration.
struct LoopDef {
  int id = 0;
  std::string iter;   // INT64 scalar, 0, 1, ...
  std::string cond;   // BOOL scalar
  std::vector<std::string> carried;
};

inline constexpr char kLoopIdAttr[] = "ndserve.loop_id";
inline constexpr char kLoopCarriedAttr[] = "ndserve.loop_carried";
inline constexpr char kScanAxesAttr[] = "ndserve.scan_axes";
inline constexpr char kScanNewAxisAttr[] = "ndserve.scan_new_axis";
inline constexpr char kScanDTypesAttr[] = "ndserve.scan_dtypes";
inline constexpr char kScanDimsAttr[] = "ndserve.scan_dims";

// A whole graph as the file states it. Initializers' byte counts are already checked
// against their shapes by whoever fills this in (the loader).
struct GraphDef {
  std::string name;
  int opset = 0;  // default-domain opset the model imports
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<Initializer> initializers;
  std::vector<NodeDef> nodes;
  std::vector<LoopDef> loops;
};

inline constexpr int kNoValue = -1;

// kLoop: a value a Loop sets before each iteration of its body (LoopBody::iter, cond,
// carried); `index` is the Loop node.
enum class ValueSource : uint8_t { kInitializer, kInput, kNode, kLoop };

// A named tensor of the graph. `index` is into initializers(), inputs() or nodes()
// according to `source`.
struct Value {
  std::string name;
  ValueSource source = ValueSource::kNode;
  int index = 0;
  bool is_graph_output = false;
  // The value whose buffer this one uses: itself, or for the output of a shape-only
  // node (IsShapeOnlyOp) the storage of that node's input, transitively.
  int storage = kNoValue;
  // Produced by a host-placed node (Node::on_host): it lives in host memory.
  bool on_host = false;
};

// How a Loop's scan output is put together from its per-iteration values: stacked along
// a new axis `axis` (ONNX's scan outputs: axis 0), or concatenated along an existing one
// (torch.cat of a list, which the loader turns into a scan output). `dtype` and `dims`
// (kAnyDim where unknown; empty with `any_rank`) are the body's declaration, for a loop
// that runs no iteration.
struct ScanOutput {
  int64_t axis = 0;
  bool new_axis = true;
  DType dtype = DType::kFp32;
  std::vector<int64_t> dims;
  bool any_rank = true;
};

// The body of a Loop node (docs/design.md §4). The node's inputs are [trip count, cond,
// initial values (N), body cond, body carried values (N), body scan outputs (K), outer
// values the body reads...]; its outputs [final carried values (N), scan outputs (K)].
struct LoopBody {
  std::vector<int> nodes;  // the nodes it holds directly, in run order
  int iter = kNoValue;     // values the Loop sets before each iteration
  int cond = kNoValue;
  std::vector<int> carried;
  std::vector<ScanOutput> scans;
};

// A validated node. `inputs` are the data inputs the kernel receives (shape-deciding
// inputs already folded into `attrs`; absent trailing optional inputs dropped);
// `outputs` are the outputs the kernel writes, kNoValue where the graph ignores one.
//
// Placement (docs/design.md section 4): a node runs on the host, with its CPU kernel on
// host buffers, when it is shape arithmetic: it reads only shapes (Shape, Size) or only
// initializers and host values, and what it computes is needed on the host (a host input
// of some node, or data of another host node). Everything else runs on the model's
// device; a host value it reads as data is uploaded per request.
//
// Host inputs computed per request: when a node's host inputs (OpInfo::host_inputs) are
// host values rather than initializers, `attrs` is empty and the attribute struct is
// built per request from `attr_map`, the constant host values in `host_values` and the
// values of `dynamic_host_inputs`.
struct Node {
  std::string name;  // the file's name, or "<op_type>_<index>" when it had none
  kernels::OpKind op = kernels::OpKind::kIdentity;
  kernels::OpAttrs attrs;
  std::vector<int> inputs;
  std::vector<int> outputs;
  bool on_host = false;
  std::vector<std::pair<int, int>> dynamic_host_inputs;        // (input position, value id)
  std::vector<std::optional<kernels::HostValue>> host_values;  // by input position
  kernels::AttrMap attr_map;
  // (condition value, value it must hold): a node of an inlined If branch, skipped in a
  // run where a condition differs, so its outputs are never computed (NodeDef::guards).
  std::vector<std::pair<int, bool>> guards;
  // A node of a Loop body: the innermost Loop node holding it (it runs from there only).
  int loop = kNoValue;
  // A Loop node: what it runs.
  std::shared_ptr<const LoopBody> body;

  bool has_dynamic_attrs() const { return !dynamic_host_inputs.empty(); }
};

// Shape-only ops whose output is the input's bytes under another shape; the predictor
// runs them as aliases, without a kernel call.
bool IsShapeOnlyOp(kernels::OpKind op);

// A validated graph: every node input is an initializer, a graph input or the output of
// an earlier node; nodes are in topological order; every op has a kernel at this opset.
// What Build does to the file's graph, in order (engine/graph_builder.cc):
//  - Identity and Dropout nodes are removed and their consumers read the input instead
//    (one that produces a graph output stays, as an aliasing Identity);
//  - nodes whose inputs are all initializers (exporters' Constants included) are computed
//    once on the CPU and become initializers (constant folding, up to kMaxFoldedBytes);
//  - shape arithmetic is placed on the host (Node::on_host);
//  - initializers that no node reads as data (Reshape shapes, Squeeze axes, unused ones)
//    are dropped.
//
// Ownership: owns its nodes, values and initializer bytes. Immutable after Build except
// ReleaseInitializerBytes; thread-safe for concurrent const use.
class Graph {
 public:
  // Validates and orders `def`. Errors (INVALID_ARGUMENT, or UNIMPLEMENTED for an
  // unsupported op or opset) name the node, op and value at fault.
  static absl::StatusOr<Graph> Build(GraphDef def);

  const std::string& name() const { return name_; }
  int opset() const { return opset_; }
  absl::Span<const TensorSpec> inputs() const { return inputs_; }
  absl::Span<const TensorSpec> outputs() const { return outputs_; }
  // Value ids of the graph inputs / outputs, parallel to inputs() / outputs().
  absl::Span<const int> input_values() const { return input_values_; }
  absl::Span<const int> output_values() const { return output_values_; }
  absl::Span<const Initializer> initializers() const { return initializers_; }
  absl::Span<const Node> nodes() const { return nodes_; }
  absl::Span<const Value> values() const { return values_; }
  // Value id of `name`, or kNoValue.
  int FindValue(absl::string_view name) const;
  // Total bytes of the initializers (what the model manager will hold).
  uint64_t InitializerBytes() const;
  // Storage values (see Value::storage) no node reads after node `node` has run, so
  // their buffers may be released then. Initializers and anything that backs a graph
  // output never appear here.
  absl::Span<const int> ReleasedAfter(int node) const { return released_after_[node]; }

  // How many nodes of the file constant folding replaced by initializers.
  int folded_nodes() const { return folded_nodes_; }
  // Some node's host input (a shape, a bound) is computed from data, not from shapes
  // alone: zero-filled inputs make up its value (Predictor::WarmUp).
  bool shapes_from_values() const { return shapes_from_values_; }
  bool has_host_nodes() const;

  // Frees the host copies of the initializers once they are on the device, except those
  // host-placed nodes read (Initializer::read_on_host); names, types and shapes stay.
  void ReleaseInitializerBytes();

 private:
  friend class GraphBuilder;

  std::string name_;
  int opset_ = 0;
  std::vector<TensorSpec> inputs_;
  std::vector<TensorSpec> outputs_;
  std::vector<int> input_values_;
  std::vector<int> output_values_;
  std::vector<Initializer> initializers_;
  std::vector<Node> nodes_;
  std::vector<Value> values_;
  std::vector<std::vector<int>> released_after_;  // per node
  int folded_nodes_ = 0;
  bool shapes_from_values_ = false;
};

// The largest output constant folding computes at load; bigger ones stay nodes.
inline constexpr uint64_t kMaxFoldedBytes = uint64_t{64} << 20;

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_GRAPH_H_
