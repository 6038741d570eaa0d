#include "engine/graph_builder.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <queue>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/optional_inputs.h"
#include "kernels/dispatch.h"
#include "kernels/shape_inference.h"

namespace ndserve::engine {
namespace {

using kernels::OpKind;

absl::Status Annotate(const absl::Status& status, absl::string_view where) {
  return absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
}

bool IsDefaultDomain(absl::string_view domain) { return domain.empty() || domain == "ai.onnx"; }

// The value of a host input (ops.def) that is an initializer, e.g. Reshape's shape.
absl::StatusOr<kernels::HostValue> HostValueOf(const Initializer& init, absl::string_view where) {
  absl::StatusOr<kernels::HostValue> v = kernels::HostValue::FromBytes(
      init.dtype, init.shape,
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(init.bytes.data()), init.bytes.size()));
  if (!v.ok()) return Annotate(v.status(), absl::StrCat(where, ": input '", init.name, "'"));
  return v;
}

// Working space for kernels run at load (constant folding): plain aligned heap blocks,
// freed with the allocator. Load time is not the request path, so malloc is fine here.
class LoadScratch : public kernels::ScratchAllocator {
 public:
  absl::StatusOr<void*> Allocate(std::size_t bytes) override {
    void* p = std::aligned_alloc(256, (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256);
    if (p == nullptr) return absl::ResourceExhaustedError("constant folding scratch");
    blocks_.emplace_back(p);
    return p;
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::vector<std::unique_ptr<void, Free>> blocks_;
};

kernels::TensorView HostView(const Initializer& init) {
  kernels::TensorView v;
  v.data = const_cast<char*>(init.bytes.data());
  v.dtype = init.dtype;
  v.shape = init.shape;
  v.device = Device::Cpu();
  return v;
}

// Output j of an If is, in a run, one of its branches' values j (input 1 + j or
// 1 + K + j), under the same bytes. So the storages of those values join the output's:
// liveness then keeps the taken value until the output's last reader, and the output's
// slot, which holds whichever was taken, is the one released. A value that joins and was
// not taken is never released early; nothing is freed twice. A branch value made outside
// the loop body the If is in cannot join (it must outlive the iteration): that output's
// storage is then never released early (`keep`), and the loop frees what its iteration
// made (PredictorContext::RunLoop).
void MergeIfStorages(std::vector<Value>& values, absl::Span<const Node> nodes,
                     absl::Span<const int> scope, std::vector<bool>& keep) {
  for (const Node& node : nodes) {
    if (node.op != OpKind::kIf) continue;
    const std::size_t k = node.outputs.size();
    for (std::size_t j = 0; j < k; ++j) {
      const int out = node.outputs[j];
      if (out == kNoValue) continue;
      const int root = values[out].storage;
      for (int in : {node.inputs[1 + j], node.inputs[1 + k + j]}) {
        const int branch = values[in].storage;
        if (scope[branch] != scope[root]) {
          keep[root] = true;
          continue;
        }
        for (Value& v : values) {
          if (v.storage == branch) v.storage = root;
        }
      }
    }
  }
}

}  // namespace

absl::StatusOr<Graph> GraphBuilder::Build() {
  NDS_RETURN_IF_ERROR(CheckOpset());
  NDS_RETURN_IF_ERROR(IndexInitializersAndInputs());
  NDS_RETURN_IF_ERROR(RemoveIdentityNodes());
  NDS_RETURN_IF_ERROR(ResolveOps());
  NDS_RETURN_IF_ERROR(CheckInputsDefinedAndOrder());
  NDS_RETURN_IF_ERROR(FoldConstants());
  PlaceShapeArithmeticOnHost();
  NDS_RETURN_IF_ERROR(BuildAttributes());
  return MakeGraph();
}

absl::Status GraphBuilder::CheckOpset() const {
  if (def_.opset < kernels::kMinOpset || def_.opset > kernels::kMaxOpset) {
    return absl::UnimplementedError(
        absl::StrFormat("unsupported opset %d of domain 'ai.onnx' (supported: %d to %d)",
                        def_.opset, kernels::kMinOpset, kernels::kMaxOpset));
  }
  return absl::OkStatus();
}

absl::Status GraphBuilder::IndexInitializersAndInputs() {
  for (int i = 0; i < static_cast<int>(def_.initializers.size()); ++i) {
    const std::string& name = def_.initializers[i].name;
    if (name.empty()) return absl::InvalidArgumentError("an initializer has no name");
    if (!init_index_.emplace(name, i).second) {
      return absl::InvalidArgumentError(absl::StrCat("initializer '", name, "' appears twice"));
    }
  }
  // Graph inputs that are also initializers (IR < 4 style) are constants, not inputs.
  for (TensorSpec& spec : def_.inputs) {
    if (init_index_.contains(spec.name)) continue;
    if (spec.name.empty()) return absl::InvalidArgumentError("a graph input has no name");
    if (!input_names_.insert(spec.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph input '", spec.name, "' is declared twice"));
    }
    inputs_.push_back(std::move(spec));
  }
  for (const LoopDef& loop : def_.loops) {
    auto add = [&](const std::string& name, bool host) {
      if (name.empty() || IsInitializer(name) || input_names_.contains(name) ||
          !loop_values_.emplace(name, host).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("loop body input '", name, "' is empty or defined twice"));
      }
      return absl::OkStatus();
    };
    NDS_RETURN_IF_ERROR(add(loop.iter, true));
    NDS_RETURN_IF_ERROR(add(loop.cond, true));
    for (const std::string& c : loop.carried) NDS_RETURN_IF_ERROR(add(c, false));
  }
  return absl::OkStatus();
}

absl::Status GraphBuilder::ResolveLoop(Resolved& rn) {
  auto ints = [&](const char* name) -> absl::StatusOr<std::vector<int64_t>> {
    auto it = rn.attr_map.find(name);
    if (it != rn.attr_map.end()) {
      if (const int64_t* v = std::get_if<int64_t>(&it->second)) return std::vector<int64_t>{*v};
      if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        rn.where, ": a Loop without its inlined body (attribute '", name, "')"));
  };
  NDS_ASSIGN_OR_RETURN(std::vector<int64_t> id, ints(kLoopIdAttr));
  NDS_ASSIGN_OR_RETURN(std::vector<int64_t> carried, ints(kLoopCarriedAttr));
  NDS_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ints(kScanAxesAttr));
  NDS_ASSIGN_OR_RETURN(std::vector<int64_t> new_axis, ints(kScanNewAxisAttr));
  NDS_ASSIGN_OR_RETURN(std::vector<int64_t> dtypes, ints(kScanDTypesAttr));
  NDS_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ints(kScanDimsAttr));
  for (const char* name : {kLoopIdAttr, kLoopCarriedAttr, kScanAxesAttr, kScanNewAxisAttr,
                           kScanDTypesAttr, kScanDimsAttr}) {
    rn.attr_map.erase(name);
  }
  if (id.size() != 1 || id[0] < 0 || id[0] >= static_cast<int64_t>(def_.loops.size()) ||
      carried.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(rn.where, ": malformed inlined Loop"));
  }
  rn.loop_id = static_cast<int>(id[0]);
  rn.carried = static_cast<int>(carried[0]);
  const std::size_t n = rn.carried;
  const std::size_t k = axes.size();
  if (new_axis.size() != k || dtypes.size() != k ||
      def_.loops[rn.loop_id].carried.size() != n || rn.outputs.size() != n + k ||
      rn.inputs.size() < 2 + n + 1 + n + k) {
    return absl::InvalidArgumentError(absl::StrCat(rn.where, ": malformed inlined Loop"));
  }
  std::size_t d = 0;
  for (std::size_t j = 0; j < k; ++j) {
    ScanOutput scan;
    scan.axis = axes[j];
    scan.new_axis = new_axis[j] != 0;
    if (dtypes[j] != 0) {
      absl::StatusOr<DType> dtype = kernels::DTypeFromOnnx(static_cast<int>(dtypes[j]));
      if (!dtype.ok()) return Annotate(dtype.status(), rn.where);
      scan.dtype = *dtype;
    }
    if (d >= dims.size()) {
      return absl::InvalidArgumentError(absl::StrCat(rn.where, ": malformed inlined Loop"));
    }
    const int64_t rank = dims[d++];
    scan.any_rank = rank < 0;
    for (int64_t r = 0; r < rank && d < dims.size(); ++r) scan.dims.push_back(dims[d++]);
    rn.scans.push_back(std::move(scan));
  }
  return absl::OkStatus();
}

// Identity is a no-op and Dropout is one in inference (its ratio and training_mode inputs
// are ignored): consumers read the input directly. A graph output keeps its name, so a
// node that produces one stays, as an aliasing Identity (no copy at run time).
absl::Status GraphBuilder::RemoveIdentityNodes() {
  absl::flat_hash_set<std::string> graph_outputs;
  for (const TensorSpec& out : def_.outputs) graph_outputs.insert(out.name);
  absl::flat_hash_set<std::string> read;
  for (const NodeDef& nd : def_.nodes) read.insert(nd.inputs.begin(), nd.inputs.end());

  absl::flat_hash_map<std::string, std::string> replaced;  // removed output -> its input
  std::vector<NodeDef> kept;
  kept.reserve(def_.nodes.size());
  for (int i = 0; i < static_cast<int>(def_.nodes.size()); ++i) {
    NodeDef& nd = def_.nodes[i];
    const bool dropout = nd.op_type == "Dropout";
    if (!IsDefaultDomain(nd.domain) || (nd.op_type != "Identity" && !dropout)) {
      kept.push_back(std::move(nd));
      continue;
    }
    const std::string where =
        absl::StrCat("node '", nd.name.empty() ? absl::StrCat(nd.op_type, "_", i) : nd.name, "' (",
                     nd.op_type, ")");
    if (nd.inputs.empty() || nd.inputs[0].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": the node has no input"));
    }
    if (dropout && nd.outputs.size() > 1 && !nd.outputs[1].empty() &&
        (read.contains(nd.outputs[1]) || graph_outputs.contains(nd.outputs[1]))) {
      return absl::UnimplementedError(
          absl::StrCat(where, ": its mask output '", nd.outputs[1],
                       "' is used, but inference runs Dropout as an identity and has no mask"));
    }
    if (nd.outputs.empty() || nd.outputs[0].empty()) continue;  // nothing reads it
    if (graph_outputs.contains(nd.outputs[0])) {
      nd.op_type = "Identity";
      nd.inputs.resize(1);
      nd.outputs.resize(1);
      nd.attrs.clear();
      kept.push_back(std::move(nd));
      continue;
    }
    replaced[nd.outputs[0]] = nd.inputs[0];
  }
  // Chains (Identity -> Dropout -> ...) in any file order: follow to the first kept value.
  auto source = [&](std::string name) {
    for (std::size_t hops = 0; hops <= replaced.size(); ++hops) {
      auto it = replaced.find(name);
      if (it == replaced.end()) break;
      name = it->second;
    }
    return name;
  };
  for (NodeDef& nd : kept) {
    for (std::string& in : nd.inputs) {
      if (!in.empty()) in = source(in);
    }
  }
  def_.nodes = std::move(kept);
  return absl::OkStatus();
}

absl::Status GraphBuilder::ResolveOps() {
  nodes_.reserve(def_.nodes.size());
  for (int i = 0; i < static_cast<int>(def_.nodes.size()); ++i) {
    NodeDef& nd = def_.nodes[i];
    Resolved rn;
    rn.name = nd.name.empty() ? absl::StrCat(nd.op_type, "_", i) : nd.name;
    rn.where = absl::StrCat("node '", rn.name, "' (", nd.op_type, ")");
    absl::StatusOr<OpKind> op = kernels::OpKindFromOnnx(nd.op_type, nd.domain, def_.opset);
    if (!op.ok()) return Annotate(op.status(), rn.where);
    rn.op = *op;
    rn.attr_map = std::move(nd.attrs);
    rn.num_inputs = static_cast<int>(nd.inputs.size());
    // Taken before the names move out of nd.inputs below.
    const int64_t present_inputs = kernels::PresentInputsMask(nd.inputs);
    const kernels::OpInfo& info = kernels::GetOpInfo(rn.op);
    for (int j = 0; j < rn.num_inputs; ++j) {
      std::string& in = nd.inputs[j];
      if (!info.IsHostInput(j)) {
        rn.inputs.push_back(std::move(in));
      } else if (!in.empty()) {
        rn.host_inputs.emplace_back(j, std::move(in));
      }
    }
    while (!rn.inputs.empty() && rn.inputs.back().empty()) rn.inputs.pop_back();
    if (kernels::AcceptsAbsentInputs(rn.op)) {  // see kernels/optional_inputs.h
      rn.attr_map[kernels::kPresentInputsAttr] = present_inputs;
      std::erase(rn.inputs, std::string());
    }
    for (int j = 0; j < static_cast<int>(rn.inputs.size()); ++j) {
      if (rn.inputs[j].empty()) {
        return absl::UnimplementedError(absl::StrFormat(
            "%s: an absent optional input before a present one (position %d) is not supported",
            rn.where, j));
      }
    }
    rn.outputs = std::move(nd.outputs);
    rn.guards = std::move(nd.guards);
    rn.loop = nd.loop;
    if (rn.op == OpKind::kLoop) {
      NDS_RETURN_IF_ERROR(ResolveLoop(rn));  // every output keeps its position
    } else {
      while (!rn.outputs.empty() && rn.outputs.back().empty()) rn.outputs.pop_back();
    }
    if (rn.outputs.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(rn.where, ": the node has no outputs"));
    }
    // The output count, for rules that need it (node_attrs.h), whenever attributes are
    // built: at load, or per request from computed host inputs.
    rn.attr_map[kernels::kNodeOutputCountAttr] = static_cast<int64_t>(rn.outputs.size());
    for (const std::string& out : rn.outputs) {
      if (out.empty()) continue;
      if (IsInitializer(out) || input_names_.contains(out) || IsLoopValue(out)) {
        return absl::InvalidArgumentError(absl::StrCat(
            rn.where, ": output '", out, "' has the name of an initializer or graph input"));
      }
      auto [it, inserted] = producer_.emplace(out, static_cast<int>(nodes_.size()));
      // The node being added is not in nodes_ yet: a name it lists twice points at it.
      if (!inserted && it->second == static_cast<int>(nodes_.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat(rn.where, ": output '", out, "' is listed twice"));
      }
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            rn.where, ": output '", out, "' is also produced by ", nodes_[it->second].where));
      }
    }
    nodes_.push_back(std::move(rn));
  }
  return absl::OkStatus();
}

// Every input (data or host) is an initializer, a graph input or some node's output;
// then Kahn's order, keeping the file's order among ready nodes.
absl::Status GraphBuilder::CheckInputsDefinedAndOrder() {
  const int n = static_cast<int>(nodes_.size());
  std::vector<std::vector<int>> consumers(n);
  std::vector<int> pending(n, 0);
  for (int i = 0; i < n; ++i) {
    const Resolved& rn = nodes_[i];
    auto depend = [&](const std::string& in) {
      auto it = producer_.find(in);
      if (it != producer_.end()) {
        consumers[it->second].push_back(i);
        ++pending[i];
      } else if (!IsInitializer(in) && !input_names_.contains(in) && !IsLoopValue(in)) {
        return absl::InvalidArgumentError(
            absl::StrCat(rn.where, ": missing input '", in,
                         "' (not an initializer, a graph input or the output of any node)"));
      }
      return absl::OkStatus();
    };
    for (const std::string& in : rn.inputs) NDS_RETURN_IF_ERROR(depend(in));
    for (const auto& [pos, in] : rn.host_inputs) NDS_RETURN_IF_ERROR(depend(in));
    for (const auto& [cond, taken] : rn.guards) NDS_RETURN_IF_ERROR(depend(cond));
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order_.push_back(i);
    for (int c : consumers[i]) {
      if (--pending[c] == 0) ready.push(c);
    }
  }
  for (int i = 0; i < n; ++i) {
    if (pending[i] > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the graph has a cycle through ", nodes_[i].where));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::optional<kernels::HostValue>>> GraphBuilder::ConstantHostValues(
    const Resolved& rn) const {
  std::vector<std::optional<kernels::HostValue>> values(rn.num_inputs);
  for (const auto& [pos, in] : rn.host_inputs) {
    auto it = init_index_.find(in);
    if (it == init_index_.end()) continue;
    NDS_ASSIGN_OR_RETURN(values[pos], HostValueOf(def_.initializers[it->second], rn.where));
  }
  return values;
}

absl::StatusOr<bool> GraphBuilder::Fold(Resolved& rn) {
  if (rn.inputs.empty() && rn.host_inputs.empty()) return false;
  for (const std::string& in : rn.inputs) {
    if (!IsInitializer(in)) return false;
  }
  for (const auto& [pos, in] : rn.host_inputs) {
    if (!IsInitializer(in)) return false;
  }
  absl::StatusOr<kernels::KernelFn> kernel = kernels::Lookup(rn.op, Device::Cpu());
  if (!kernel.ok()) return false;  // the device may have one; it runs per request then
  NDS_ASSIGN_OR_RETURN(std::vector<std::optional<kernels::HostValue>> host, ConstantHostValues(rn));
  absl::StatusOr<kernels::OpAttrs> attrs =
      kernels::BuildOpAttrs(rn.op, def_.opset, rn.attr_map, kernels::HostInputs(std::move(host)));
  if (!attrs.ok()) return Annotate(attrs.status(), rn.where);
  std::vector<kernels::TensorView> in_views;
  std::vector<kernels::TensorDesc> descs;
  for (const std::string& in : rn.inputs) {
    in_views.push_back(HostView(def_.initializers[init_index_.at(in)]));
    descs.push_back(in_views.back().desc());
  }
  absl::StatusOr<std::vector<kernels::TensorDesc>> inferred =
      kernels::InferOutputs(rn.op, descs, *attrs);
  if (!inferred.ok()) return Annotate(inferred.status(), rn.where);
  if (inferred->size() < rn.outputs.size()) return false;  // reported when it runs
  std::vector<Initializer> results(rn.outputs.size());
  for (std::size_t j = 0; j < rn.outputs.size(); ++j) {
    const kernels::TensorDesc& d = (*inferred)[j];
    const uint64_t bytes =
        static_cast<uint64_t>(kernels::NumElements(d.shape)) * DTypeSize(d.dtype);
    if (bytes > kMaxFoldedBytes) return false;
    results[j].name = rn.outputs[j];
    results[j].dtype = d.dtype;
    results[j].shape = d.shape;
    results[j].bytes.resize(bytes);
  }
  std::vector<kernels::TensorView> out_views;
  for (const Initializer& r : results) out_views.push_back(HostView(r));
  LoadScratch scratch;
  kernels::KernelContext ctx = kernels::KernelContext::Cpu();
  ctx.scratch = &scratch;
  absl::Status ran = (*kernel)(ctx, in_views, out_views, *attrs);
  if (!ran.ok()) return Annotate(ran, rn.where);
  for (Initializer& r : results) {
    if (r.name.empty()) continue;
    producer_.erase(r.name);
    init_index_[r.name] = static_cast<int>(def_.initializers.size());
    def_.initializers.push_back(std::move(r));
  }
  return true;
}

absl::Status GraphBuilder::FoldConstants() {
  for (int i : order_) {
    absl::StatusOr<bool> folded = Fold(nodes_[i]);
    // A branch node may fail on constants its branch never sees taken: it stays a node,
    // and reports that only in a run that takes the branch. A loop body's likewise, for a
    // loop that may run no iteration.
    if (!folded.ok() && (!nodes_[i].guards.empty() || nodes_[i].loop >= 0)) folded = false;
    NDS_ASSIGN_OR_RETURN(nodes_[i].folded, std::move(folded));
    if (nodes_[i].folded) ++folded_;
  }
  return absl::OkStatus();
}

bool GraphBuilder::IsHostValue(const std::string& name) const {
  if (auto l = loop_values_.find(name); l != loop_values_.end()) return l->second;
  auto it = producer_.find(name);
  return it != producer_.end() && nodes_[it->second].on_host;
}

// Two sweeps. Forward: a node can run on the host when the CPU has its kernel and it
// reads only shapes, or only initializers and outputs of nodes that can. Backward: it
// does run there when its result is needed on the host (some node's host input, or data
// of a host node), or when it reads only shapes (then nothing touches the device).
void GraphBuilder::PlaceShapeArithmeticOnHost() {
  const int n = static_cast<int>(nodes_.size());
  std::vector<bool> can(n, false);
  auto from_can = [&](const std::string& in) {
    if (IsInitializer(in)) return true;
    // The iteration number and condition a Loop sets are host values; carried ones are not.
    if (auto l = loop_values_.find(in); l != loop_values_.end()) return l->second;
    auto it = producer_.find(in);
    return it != producer_.end() && can[it->second];
  };
  for (int i : order_) {
    Resolved& rn = nodes_[i];
    // If has no kernel: it can be on the host when the values it picks from are.
    // A Loop's outputs are device values; an If can be on the host when the values it
    // picks from are (it has no kernel).
    const bool control = kernels::GetOpInfo(rn.op).control;
    if (rn.folded || rn.op == OpKind::kLoop ||
        (!control && !kernels::Lookup(rn.op, Device::Cpu()).ok())) {
      continue;
    }
    // Data and host inputs alike: ConstantOfShape and Range have only host inputs.
    bool all_can = true;
    bool any_computed = false;
    auto visit = [&](const std::string& in) {
      all_can = all_can && from_can(in);
      any_computed = any_computed || !IsInitializer(in);
    };
    for (const std::string& in : rn.inputs) visit(in);
    for (const auto& [pos, in] : rn.host_inputs) visit(in);
    if (kernels::GetOpInfo(rn.op).reads_shapes_only) {
      bool hosts_ok = true;
      for (const auto& [pos, in] : rn.host_inputs) hosts_ok = hosts_ok && from_can(in);
      can[i] = hosts_ok;
    } else {
      can[i] = all_can && any_computed;
    }
  }
  // Who needs each value on the host.
  absl::flat_hash_set<std::string> read_as_host_input;
  for (const Resolved& rn : nodes_) {
    if (rn.folded) continue;
    for (const auto& [pos, in] : rn.host_inputs) read_as_host_input.insert(in);
  }
  absl::flat_hash_set<std::string> read_by_host_node;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    Resolved& rn = nodes_[*it];
    if (!can[*it]) continue;
    bool needed = kernels::GetOpInfo(rn.op).reads_shapes_only;
    for (const std::string& out : rn.outputs) {
      needed = needed || read_as_host_input.contains(out) || read_by_host_node.contains(out);
    }
    if (!needed) continue;
    rn.on_host = true;
    read_by_host_node.insert(rn.inputs.begin(), rn.inputs.end());
  }
}

absl::Status GraphBuilder::BuildAttributes() {
  for (int i : order_) {
    Resolved& rn = nodes_[i];
    if (rn.folded) continue;
    for (const auto& [pos, in] : rn.host_inputs) {
      if (IsInitializer(in)) continue;
      // Computed per request: on the host from shapes (free), or from data (a graph input,
      // a device node's output), which the request then reads back from the device
      // (PredictorContext::RequestAttrs): torch.arange(lengths.max()), x[:, :n].
      if (!IsHostValue(in)) shapes_from_values_ = true;
      rn.dynamic_host_inputs.emplace_back(pos, in);
    }
    NDS_ASSIGN_OR_RETURN(std::vector<std::optional<kernels::HostValue>> host,
                         ConstantHostValues(rn));
    if (!rn.dynamic_host_inputs.empty()) {
      rn.host_values = std::move(host);  // the attributes are built per request
      continue;
    }
    absl::StatusOr<kernels::OpAttrs> attrs =
        kernels::BuildOpAttrs(rn.op, def_.opset, rn.attr_map, kernels::HostInputs(std::move(host)));
    if (!attrs.ok()) return Annotate(attrs.status(), rn.where);
    rn.attrs = *std::move(attrs);
    rn.attr_map.clear();
  }
  return absl::OkStatus();
}

// Values (graph inputs, the initializers nodes read as data, node outputs), nodes in
// order, graph outputs, and when each buffer is read for the last time.
absl::StatusOr<Graph> GraphBuilder::MakeGraph() {
  Graph g;
  g.name_ = std::move(def_.name);
  g.opset_ = def_.opset;
  g.folded_nodes_ = folded_;
  g.shapes_from_values_ = shapes_from_values_;
  absl::flat_hash_map<std::string, int> value_of;
  auto add_value = [&](const std::string& name, ValueSource source, int index) {
    const int id = static_cast<int>(g.values_.size());
    g.values_.push_back(Value{name, source, index, false, id});
    value_of.emplace(name, id);
    return id;
  };
  g.inputs_ = std::move(inputs_);
  for (int i = 0; i < static_cast<int>(g.inputs_.size()); ++i) {
    g.input_values_.push_back(add_value(g.inputs_[i].name, ValueSource::kInput, i));
  }
  // What each Loop sets per iteration (the index becomes its node below).
  std::vector<LoopBody> bodies(def_.loops.size());
  for (const LoopDef& loop : def_.loops) {
    LoopBody& body = bodies[loop.id];
    body.iter = add_value(loop.iter, ValueSource::kLoop, loop.id);
    body.cond = add_value(loop.cond, ValueSource::kLoop, loop.id);
    g.values_[body.iter].on_host = g.values_[body.cond].on_host = true;
    for (const std::string& c : loop.carried) {
      body.carried.push_back(add_value(c, ValueSource::kLoop, loop.id));
    }
  }
  std::vector<int> loop_node(def_.loops.size(), kNoValue);  // by LoopDef::id
  auto use_initializer = [&](const std::string& name) {
    if (value_of.contains(name)) return;
    const int index = static_cast<int>(g.initializers_.size());
    g.initializers_.push_back(std::move(def_.initializers[init_index_.at(name)]));
    add_value(name, ValueSource::kInitializer, index);
  };
  for (int i : order_) {
    if (nodes_[i].folded) continue;
    for (const std::string& in : nodes_[i].inputs) {
      if (IsInitializer(in)) use_initializer(in);
    }
    for (const auto& [cond, taken] : nodes_[i].guards) {
      if (IsInitializer(cond)) use_initializer(cond);
    }
  }
  for (const TensorSpec& out : def_.outputs) {
    if (IsInitializer(out.name)) use_initializer(out.name);
  }
  for (int i : order_) {
    Resolved& rn = nodes_[i];
    if (rn.folded) continue;
    Node node;
    node.name = std::move(rn.name);
    node.op = rn.op;
    node.attrs = std::move(rn.attrs);
    node.on_host = rn.on_host;
    node.attr_map = std::move(rn.attr_map);
    node.host_values = std::move(rn.host_values);
    for (const std::string& in : rn.inputs) {
      const int v = value_of.at(in);
      node.inputs.push_back(v);
      if (node.on_host && g.values_[v].source == ValueSource::kInitializer) {
        g.initializers_[g.values_[v].index].read_on_host = true;
      }
    }
    for (const auto& [pos, in] : rn.dynamic_host_inputs) {
      node.dynamic_host_inputs.emplace_back(pos, value_of.at(in));
    }
    for (const auto& [cond, taken] : rn.guards) node.guards.emplace_back(value_of.at(cond), taken);
    const int node_index = static_cast<int>(g.nodes_.size());
    node.loop = rn.loop;  // the LoopDef::id for now
    if (node.op == OpKind::kLoop) {
      loop_node[rn.loop_id] = node_index;
      bodies[rn.loop_id].scans = std::move(rn.scans);
      // The trip count and conditions are read on the host each iteration.
      for (int pos : {0, 1, 2 + rn.carried}) {
        const Value& v = g.values_[node.inputs[pos]];
        if (v.source == ValueSource::kInitializer) g.initializers_[v.index].read_on_host = true;
      }
    }
    for (const std::string& out : rn.outputs) {
      if (out.empty()) {
        node.outputs.push_back(kNoValue);
        continue;
      }
      const int v = add_value(out, ValueSource::kNode, node_index);
      g.values_[v].on_host = node.on_host;
      node.outputs.push_back(v);
    }
    if (IsShapeOnlyOp(node.op) && !node.inputs.empty() && node.outputs[0] != kNoValue) {
      g.values_[node.outputs[0]].storage = g.values_[node.inputs[0]].storage;
    }
    g.nodes_.push_back(std::move(node));
  }

  g.outputs_ = std::move(def_.outputs);
  for (const TensorSpec& out : g.outputs_) {
    auto it = value_of.find(out.name);
    if (it == value_of.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "graph output '", out.name, "' is not produced by any node, input or initializer"));
    }
    g.values_[it->second].is_graph_output = true;
    g.output_values_.push_back(it->second);
  }

  NDS_RETURN_IF_ERROR(LinkLoops(g, std::move(bodies), loop_node));
  ComputeLiveness(g);
  return g;
}

absl::Status GraphBuilder::LinkLoops(Graph& g, std::vector<LoopBody> bodies,
                                     absl::Span<const int> loop_node) {
  absl::flat_hash_map<int, int> id_of;  // Loop node -> LoopDef::id
  for (int id = 0; id < static_cast<int>(bodies.size()); ++id) {
    if (loop_node[id] == kNoValue) {
      return absl::InternalError(absl::StrCat("loop ", id, " has no Loop node"));
    }
    id_of[loop_node[id]] = id;
  }
  for (int n = 0; n < static_cast<int>(g.nodes_.size()); ++n) {
    Node& node = g.nodes_[n];
    if (node.loop == kNoValue) continue;
    node.loop = loop_node[node.loop];
    bodies[id_of.at(node.loop)].nodes.push_back(n);  // in run order, as the nodes are
  }
  for (Value& v : g.values_) {
    if (v.source == ValueSource::kLoop) v.index = loop_node[v.index];
  }
  for (int id = 0; id < static_cast<int>(bodies.size()); ++id) {
    g.nodes_[loop_node[id]].body = std::make_shared<const LoopBody>(std::move(bodies[id]));
  }
  return absl::OkStatus();
}

// When each storage is read for the last time, scope by scope: a value made in a loop
// body is released within the iteration after its last reader there, and a read from
// inside a body of a value made outside counts as a read by the Loop node around the
// reader that sits in the value's scope, since every iteration reads it again. Storages
// whose lifetime the loop decides (what it sets per iteration, what the body hands back
// to it) are never released here: the loop frees what each iteration made
// (PredictorContext::RunLoop).
void GraphBuilder::ComputeLiveness(Graph& g) {
  const int values = static_cast<int>(g.values_.size());
  // The Loop node whose body makes each value; kNoValue at the top level.
  std::vector<int> scope(values, kNoValue);
  for (int v = 0; v < values; ++v) {
    const Value& val = g.values_[v];
    if (val.source == ValueSource::kNode) scope[v] = g.nodes_[val.index].loop;
    if (val.source == ValueSource::kLoop) scope[v] = val.index;
  }
  std::vector<bool> keep(values, false);
  MergeIfStorages(g.values_, g.nodes_, scope, keep);
  // The node of `target` scope that holds node `n` (itself or a Loop around it).
  auto in_scope = [&](int n, int target) {
    while (n != kNoValue && g.nodes_[n].loop != target) n = g.nodes_[n].loop;
    return n;
  };
  std::vector<int> last_read(values, kNoValue);
  auto note = [&](int n, int value) {
    const int s = g.values_[value].storage;
    const int r = in_scope(n, scope[s]);
    if (r == kNoValue) {
      keep[s] = true;  // the Loop reads its body's value: the loop decides
    } else {
      last_read[s] = std::max(last_read[s], r);
    }
  };
  for (int v = 0; v < values; ++v) {
    const Value& val = g.values_[v];
    if (val.source == ValueSource::kNode) note(val.index, v);
    if (val.source == ValueSource::kLoop) keep[val.storage] = true;
    // Until the request ends.
    if (val.is_graph_output || val.source == ValueSource::kInitializer) keep[val.storage] = true;
  }
  for (int n = 0; n < static_cast<int>(g.nodes_.size()); ++n) {
    for (int in : g.nodes_[n].inputs) note(n, in);
    for (const auto& [pos, in] : g.nodes_[n].dynamic_host_inputs) note(n, in);
    for (const auto& [cond, taken] : g.nodes_[n].guards) note(n, cond);
  }
  g.released_after_.assign(g.nodes_.size(), {});
  for (int s = 0; s < values; ++s) {
    if (g.values_[s].storage == s && !keep[s] && last_read[s] >= 0) {
      g.released_after_[last_read[s]].push_back(s);
    }
  }
}

}  // namespace ndserve::engine
