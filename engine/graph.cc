#include "engine/graph.h"

#include <cstring>
#include <optional>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace ndserve::engine {
namespace {

using kernels::OpKind;

// A node after op and attribute resolution, before ordering.
struct ResolvedNode {
  std::string name;
  std::string where;  // "node 'fc0' (Gemm)", for errors
  OpKind op;
  kernels::OpAttrs attrs;
  std::vector<std::string> inputs;       // data inputs, non-empty names
  std::vector<std::string> outputs;      // "" for ignored ones
  std::string non_constant_shape_input;  // a shape input that is not an initializer
};

absl::Status Annotate(const absl::Status& status, absl::string_view where) {
  return absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
}

// The value of a host input (ops.def) that is an initializer, e.g. Reshape's shape.
absl::StatusOr<kernels::HostValue> HostValueOf(const Initializer& init, absl::string_view where) {
  absl::StatusOr<kernels::HostValue> v = kernels::HostValue::FromBytes(
      init.dtype, init.shape,
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(init.bytes.data()), init.bytes.size()));
  if (!v.ok()) return Annotate(v.status(), absl::StrCat(where, ": input '", init.name, "'"));
  return v;
}

absl::Status MissingInput(const ResolvedNode& rn, absl::string_view input) {
  return absl::InvalidArgumentError(
      absl::StrCat(rn.where, ": missing input '", input,
                   "' (not an initializer, a graph input or the output of any node)"));
}

}  // namespace

bool IsShapeOnlyOp(OpKind op) { return kernels::GetOpInfo(op).alias; }

absl::StatusOr<Graph> Graph::Build(GraphDef def) {
  if (def.opset < kernels::kMinOpset || def.opset > kernels::kMaxOpset) {
    return absl::UnimplementedError(
        absl::StrFormat("unsupported opset %d of domain 'ai.onnx' (supported: %d to %d)", def.opset,
                        kernels::kMinOpset, kernels::kMaxOpset));
  }

  // 1. Who defines each name: an initializer, a graph input or a node.
  absl::flat_hash_map<std::string, int> init_index;
  for (int i = 0; i < static_cast<int>(def.initializers.size()); ++i) {
    const std::string& name = def.initializers[i].name;
    if (name.empty()) return absl::InvalidArgumentError("an initializer has no name");
    if (!init_index.emplace(name, i).second) {
      return absl::InvalidArgumentError(absl::StrCat("initializer '", name, "' appears twice"));
    }
  }
  // Graph inputs that are also initializers (IR < 4 style) are constants, not inputs.
  std::vector<TensorSpec> inputs;
  absl::flat_hash_set<std::string> input_names;
  for (TensorSpec& spec : def.inputs) {
    if (init_index.contains(spec.name)) continue;
    if (spec.name.empty()) return absl::InvalidArgumentError("a graph input has no name");
    if (!input_names.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph input '", spec.name, "' is declared twice"));
    }
    inputs.push_back(std::move(spec));
  }

  // 2. Resolve ops and attributes; fold shape-deciding inputs into the attributes.
  std::vector<ResolvedNode> resolved;
  resolved.reserve(def.nodes.size());
  absl::flat_hash_map<std::string, int> producer;  // value name -> index into resolved
  for (int i = 0; i < static_cast<int>(def.nodes.size()); ++i) {
    NodeDef& nd = def.nodes[i];
    ResolvedNode rn;
    rn.name = nd.name.empty() ? absl::StrCat(nd.op_type, "_", i) : nd.name;
    rn.where = absl::StrCat("node '", rn.name, "' (", nd.op_type, ")");
    absl::StatusOr<OpKind> op = kernels::OpKindFromOnnx(nd.op_type, nd.domain, def.opset);
    if (!op.ok()) return Annotate(op.status(), rn.where);
    rn.op = *op;
    const kernels::OpInfo& info = kernels::GetOpInfo(rn.op);
    std::vector<std::optional<kernels::HostValue>> host_values(nd.inputs.size());
    for (int j = 0; j < static_cast<int>(nd.inputs.size()); ++j) {
      const std::string& in = nd.inputs[j];
      if (!info.IsHostInput(j)) {
        rn.inputs.push_back(in);
        continue;
      }
      if (in.empty()) continue;
      auto it = init_index.find(in);
      if (it == init_index.end()) {
        if (input_names.contains(in)) {
          return absl::UnimplementedError(absl::StrCat(
              rn.where, ": input '", in,
              "' decides the output shape and must be an initializer, not a graph input"));
        }
        // Either another node's output (not supported) or missing altogether; which one
        // is known once every producer is (below).
        rn.non_constant_shape_input = in;
        continue;
      }
      NDS_ASSIGN_OR_RETURN(host_values[j], HostValueOf(def.initializers[it->second], rn.where));
    }
    while (!rn.inputs.empty() && rn.inputs.back().empty()) rn.inputs.pop_back();
    for (int j = 0; j < static_cast<int>(rn.inputs.size()); ++j) {
      if (rn.inputs[j].empty()) {
        return absl::UnimplementedError(absl::StrFormat(
            "%s: an absent optional input before a present one (position %d) is not supported",
            rn.where, j));
      }
    }
    rn.outputs = std::move(nd.outputs);
    while (!rn.outputs.empty() && rn.outputs.back().empty()) rn.outputs.pop_back();
    if (rn.outputs.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(rn.where, ": the node has no outputs"));
    }
    // The output count, for rules that need it (node_attrs.h), whenever attributes are
    // built: here, or later from computed shape inputs.
    nd.attrs[kernels::kNodeOutputCountAttr] = static_cast<int64_t>(rn.outputs.size());
    // A node whose shape input is computed is reported (below) once it is known whether
    // that input exists at all; its attributes cannot be built without the values.
    if (rn.non_constant_shape_input.empty()) {
      absl::StatusOr<kernels::OpAttrs> attrs =
          kernels::BuildOpAttrs(rn.op, def.opset, nd.attrs,
                                kernels::HostInputs(std::move(host_values)));
      if (!attrs.ok()) return Annotate(attrs.status(), rn.where);
      rn.attrs = *std::move(attrs);
    }
    for (const std::string& out : rn.outputs) {
      if (out.empty()) continue;
      if (init_index.contains(out) || input_names.contains(out)) {
        return absl::InvalidArgumentError(absl::StrCat(
            rn.where, ": output '", out, "' has the name of an initializer or graph input"));
      }
      auto [it, inserted] = producer.emplace(out, static_cast<int>(resolved.size()));
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            rn.where, ": output '", out, "' is also produced by ", resolved[it->second].where));
      }
    }
    resolved.push_back(std::move(rn));
  }

  // 3. Every input must be defined somewhere.
  std::vector<std::vector<int>> consumers(resolved.size());
  std::vector<int> pending_deps(resolved.size(), 0);
  for (int i = 0; i < static_cast<int>(resolved.size()); ++i) {
    const ResolvedNode& rn = resolved[i];
    if (!rn.non_constant_shape_input.empty()) {
      auto it = producer.find(rn.non_constant_shape_input);
      if (it == producer.end()) return MissingInput(rn, rn.non_constant_shape_input);
      return absl::UnimplementedError(
          absl::StrCat(rn.where, ": input '", rn.non_constant_shape_input,
                       "' decides the output shape and must be an initializer, not computed by ",
                       resolved[it->second].where));
    }
    for (const std::string& in : rn.inputs) {
      auto it = producer.find(in);
      if (it != producer.end()) {
        consumers[it->second].push_back(i);
        ++pending_deps[i];
      } else if (!init_index.contains(in) && !input_names.contains(in)) {
        return MissingInput(rn, in);
      }
    }
  }

  // 4. Topological order (Kahn), keeping the file's order among ready nodes.
  std::vector<int> order;
  order.reserve(resolved.size());
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < static_cast<int>(resolved.size()); ++i) {
    if (pending_deps[i] == 0) ready.push(i);
  }
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int c : consumers[i]) {
      if (--pending_deps[c] == 0) ready.push(c);
    }
  }
  if (order.size() != resolved.size()) {
    for (int i = 0; i < static_cast<int>(resolved.size()); ++i) {
      if (pending_deps[i] > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("the graph has a cycle through ", resolved[i].where));
      }
    }
  }

  // 5. Values: graph inputs, the initializers nodes read as data, node outputs.
  Graph g;
  g.name_ = std::move(def.name);
  g.opset_ = def.opset;
  absl::flat_hash_map<std::string, int> value_of;
  auto add_value = [&](const std::string& name, ValueSource source, int index) {
    const int id = static_cast<int>(g.values_.size());
    g.values_.push_back(Value{name, source, index, false, id});
    value_of.emplace(name, id);
    return id;
  };
  g.inputs_ = std::move(inputs);
  for (int i = 0; i < static_cast<int>(g.inputs_.size()); ++i) {
    g.input_values_.push_back(add_value(g.inputs_[i].name, ValueSource::kInput, i));
  }
  auto use_initializer = [&](const std::string& name) {
    if (value_of.contains(name)) return;
    const int index = static_cast<int>(g.initializers_.size());
    g.initializers_.push_back(std::move(def.initializers[init_index.at(name)]));
    add_value(name, ValueSource::kInitializer, index);
  };
  for (int i : order) {
    for (const std::string& in : resolved[i].inputs) {
      if (!producer.contains(in) && init_index.contains(in)) use_initializer(in);
    }
  }
  for (const TensorSpec& out : def.outputs) {
    if (!producer.contains(out.name) && init_index.contains(out.name)) {
      use_initializer(out.name);
    }
  }
  for (int i : order) {
    ResolvedNode& rn = resolved[i];
    Node node;
    node.name = std::move(rn.name);
    node.op = rn.op;
    node.attrs = std::move(rn.attrs);
    for (const std::string& in : rn.inputs) node.inputs.push_back(value_of.at(in));
    const int node_index = static_cast<int>(g.nodes_.size());
    for (const std::string& out : rn.outputs) {
      node.outputs.push_back(out.empty() ? kNoValue
                                         : add_value(out, ValueSource::kNode, node_index));
    }
    if (IsShapeOnlyOp(node.op) && !node.inputs.empty() && node.outputs[0] != kNoValue) {
      g.values_[node.outputs[0]].storage = g.values_[node.inputs[0]].storage;
    }
    g.nodes_.push_back(std::move(node));
  }

  // 6. Graph outputs.
  g.outputs_ = std::move(def.outputs);
  for (const TensorSpec& out : g.outputs_) {
    auto it = value_of.find(out.name);
    if (it == value_of.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph output '", out.name, "' is not produced by any node, input or initializer"));
    }
    g.values_[it->second].is_graph_output = true;
    g.output_values_.push_back(it->second);
  }

  // 7. When each buffer is read for the last time. A storage that backs a graph output
  // or an initializer is kept until the request ends.
  constexpr int kKeep = -2;
  std::vector<int> last_read(g.values_.size(), kNoValue);
  for (const Value& v : g.values_) {
    if (v.source == ValueSource::kNode) {
      last_read[v.storage] = std::max(last_read[v.storage], v.index);
    }
  }
  for (int n = 0; n < static_cast<int>(g.nodes_.size()); ++n) {
    for (int in : g.nodes_[n].inputs) {
      const int s = g.values_[in].storage;
      last_read[s] = std::max(last_read[s], n);
    }
  }
  for (const Value& v : g.values_) {
    if (v.is_graph_output || v.source == ValueSource::kInitializer) last_read[v.storage] = kKeep;
  }
  g.released_after_.resize(g.nodes_.size());
  for (int s = 0; s < static_cast<int>(g.values_.size()); ++s) {
    if (g.values_[s].storage == s && last_read[s] >= 0)
      g.released_after_[last_read[s]].push_back(s);
  }
  return g;
}

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

void Graph::ReleaseInitializerBytes() {
  for (Initializer& init : initializers_) std::string().swap(init.bytes);
}

}  // namespace ndserve::engine
