#include "engine/subgraph_inliner.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "engine/onnx_convert.h"
#include "kernels/node_attrs.h"

namespace ndserve::engine {
namespace {

bool IsOp(const onnx::NodeProto& n, absl::string_view op) {
  return n.op_type() == op && IsDefaultDomain(n.domain());
}

bool IsSequenceOp(const onnx::NodeProto& n) {
  return IsDefaultDomain(n.domain()) &&
         (absl::StartsWith(n.op_type(), "Sequence") || n.op_type() == "ConcatFromSequence" ||
          n.op_type() == "SplitToSequence");
}

onnx::GraphProto* Subgraph(onnx::NodeProto& n, absl::string_view name) {
  for (onnx::AttributeProto& a : *n.mutable_attribute()) {
    if (a.name() == name && a.type() == onnx::AttributeProto::GRAPH && a.has_g()) {
      return a.mutable_g();
    }
  }
  return nullptr;
}

// Attributes the sequence rewrite adds to a Loop it changed: per scan output it turned
// a list into (appended after the Loop's own), ConcatFromSequence's axis and new_axis.
constexpr char kListAxesAttr[] = "ndserve.list_axes";
constexpr char kListNewAxisAttr[] = "ndserve.list_new_axis";

// How many times each name is read in `g`, its subgraphs' reads of it included.
void CountReads(const onnx::GraphProto& g, absl::flat_hash_map<std::string, int>& reads) {
  for (const onnx::NodeProto& n : g.node()) {
    for (const std::string& in : n.input()) {
      if (!in.empty()) ++reads[in];
    }
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) CountReads(a.g(), reads);
      for (const onnx::GraphProto& sub : a.graphs()) CountReads(sub, reads);
    }
  }
}

template <typename T>
void EraseAt(google::protobuf::RepeatedPtrField<T>* field, int index) {
  field->erase(field->begin() + index);
}

void RemoveNodes(google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes,
                 const absl::flat_hash_set<const onnx::NodeProto*>& dead) {
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (onnx::NodeProto& n : *nodes) {
    if (!dead.contains(&n)) *kept.Add() = std::move(n);
  }
  nodes->Swap(&kept);
}

// Turns each list a Loop of `g` only appends to into a scan output (see the header).
// What does not fit the pattern is left alone, and refused later as a sequence.
void RewriteListLoops(onnx::GraphProto& g) {
  absl::flat_hash_map<std::string, int> reads;
  CountReads(g, reads);
  absl::flat_hash_map<std::string, onnx::NodeProto*> producer;
  absl::flat_hash_map<std::string, std::vector<onnx::NodeProto*>> readers;
  absl::flat_hash_set<std::string> graph_outputs;
  for (const onnx::ValueInfoProto& out : g.output()) graph_outputs.insert(out.name());
  for (onnx::NodeProto& n : *g.mutable_node()) {
    for (const std::string& out : n.output()) producer[out] = &n;
    for (const std::string& in : n.input()) readers[in].push_back(&n);
  }
  absl::flat_hash_set<const onnx::NodeProto*> dead;
  for (onnx::NodeProto& loop : *g.mutable_node()) {
    if (!IsOp(loop, "Loop")) continue;
    onnx::GraphProto* body = Subgraph(loop, "body");
    const int carried = loop.input_size() - 2;
    if (body == nullptr || carried <= 0 || body->input_size() != 2 + carried ||
        body->output_size() != 1 + loop.output_size() || loop.output_size() < carried) {
      continue;  // malformed: AddLoop reports it
    }
    absl::flat_hash_map<std::string, int> body_reads;
    CountReads(*body, body_reads);
    std::vector<int64_t> axes, new_axes;
    for (int j = carried - 1; j >= 0; --j) {
      const std::string& init = loop.input(2 + j);
      auto p = producer.find(init);
      if (p == producer.end() || !IsOp(*p->second, "SequenceEmpty") || reads[init] != 1) continue;
      const std::string seq_in = body->input(2 + j).name();
      const std::string seq_out = body->output(1 + j).name();
      if (body_reads[seq_in] != 1 || body_reads[seq_out] != 0) continue;
      onnx::NodeProto* insert = nullptr;
      for (onnx::NodeProto& bn : *body->mutable_node()) {
        if (IsOp(bn, "SequenceInsert") && bn.input_size() == 2 && bn.input(0) == seq_in &&
            bn.output_size() == 1 && bn.output(0) == seq_out) {
          insert = &bn;
        }
      }
      // Every reader after the loop a ConcatFromSequence (torch.stack(outs, -1) and
      // torch.stack(outs) of one list are two): one scan output each.
      const std::string final_seq = loop.output(j);
      auto c = readers.find(final_seq);
      if (insert == nullptr || graph_outputs.contains(final_seq) || c == readers.end() ||
          reads[final_seq] != static_cast<int>(c->second.size())) {
        continue;
      }
      std::vector<std::pair<int64_t, int64_t>> concat_axes;  // (axis, new_axis)
      for (const onnx::NodeProto* concat : c->second) {
        bool has_axis = false;
        std::pair<int64_t, int64_t> axes_of = {0, 0};
        for (const onnx::AttributeProto& a : concat->attribute()) {
          if (a.name() == "axis") axes_of.first = a.i(), has_axis = true;
          if (a.name() == "new_axis") axes_of.second = a.i();
        }
        // axis is required: without it the node is refused as a sequence op.
        if (!IsOp(*concat, "ConcatFromSequence") || concat->input_size() != 1 ||
            concat->output_size() != 1 || !has_axis) {
          break;
        }
        concat_axes.push_back(axes_of);
      }
      if (concat_axes.size() != c->second.size()) continue;
      int32_t elem_type = onnx::TensorProto::FLOAT;
      for (const onnx::AttributeProto& a : p->second->attribute()) {
        if (a.name() == "dtype") elem_type = static_cast<int32_t>(a.i());
      }
      // The appended tensor becomes the body's scan output, the concatenation the Loop's.
      const std::string appended = insert->input(1);
      EraseAt(body->mutable_input(), 2 + j);
      EraseAt(body->mutable_output(), 1 + j);
      EraseAt(loop.mutable_input(), 2 + j);
      EraseAt(loop.mutable_output(), j);
      for (std::size_t r = 0; r < concat_axes.size(); ++r) {
        onnx::ValueInfoProto* scan = body->add_output();
        scan->set_name(appended);
        scan->mutable_type()->mutable_tensor_type()->set_elem_type(elem_type);
        loop.add_output(c->second[r]->output(0));
        axes.push_back(concat_axes[r].first);
        new_axes.push_back(concat_axes[r].second);
        dead.insert(c->second[r]);
      }
      dead.insert(p->second);
      absl::flat_hash_set<const onnx::NodeProto*> body_dead = {insert};
      RemoveNodes(body->mutable_node(), body_dead);
    }
    if (axes.empty()) continue;
    onnx::AttributeProto* a = loop.add_attribute();
    a->set_name(kListAxesAttr);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : axes) a->add_ints(v);
    a = loop.add_attribute();
    a->set_name(kListNewAxisAttr);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : new_axes) a->add_ints(v);
  }
  if (!dead.empty()) RemoveNodes(g.mutable_node(), dead);
}

Initializer ScalarInitializer(std::string name, DType dtype, const void* value, size_t bytes) {
  Initializer init;
  init.name = std::move(name);
  init.dtype = dtype;
  init.bytes.assign(static_cast<const char*>(value), bytes);
  return init;
}

class SubgraphInliner {
 public:
  struct Scope {
    absl::flat_hash_map<std::string, std::string> renamed;  // subgraph-local -> graph name
    std::vector<std::pair<std::string, bool>> guards;
    std::string prefix;  // for node names and the names the scope defines
    int loop = -1;       // the innermost loop's LoopDef::id
  };

  explicit SubgraphInliner(GraphDef* def) : def_(def) {}

  absl::Status AddNodes(onnx::GraphProto& graph, const Scope& scope) {
    RewriteListLoops(graph);
    for (onnx::NodeProto& n : *graph.mutable_node()) {
      if (IsOp(n, "Constant")) {
        Initializer init;
        NDS_RETURN_IF_ERROR(ConstantToInitializer(n, &init));
        init.name = Name(scope, init.name);
        def_->initializers.push_back(std::move(init));
        continue;
      }
      if (IsOp(n, "If")) {
        NDS_RETURN_IF_ERROR(AddIf(n, scope));
        continue;
      }
      if (IsOp(n, "Loop")) {
        NDS_RETURN_IF_ERROR(AddLoop(n, scope));
        continue;
      }
      if (IsSequenceOp(n)) {
        NDS_RETURN_IF_ERROR(AddSequenceOp(n, scope));
        continue;
      }
      NodeDef nd;
      nd.name = n.name().empty() ? n.name() : scope.prefix + n.name();
      nd.op_type = n.op_type();
      nd.domain = n.domain();
      for (const std::string& in : n.input()) nd.inputs.push_back(Name(scope, in));
      for (const std::string& out : n.output()) nd.outputs.push_back(Name(scope, out));
      nd.guards = scope.guards;
      nd.loop = scope.loop;
      for (const onnx::AttributeProto& a : n.attribute()) {
        // The engine's own rewrites (engine/fusion.h) mark nodes with these names.
        if (absl::StartsWith(a.name(), "ndserve.")) {
          return absl::InvalidArgumentError(
              absl::StrCat("node '", n.name(), "' (", n.op_type(), "): attribute '", a.name(),
                           "' uses the prefix 'ndserve.' reserved for the engine's own rewrites"));
        }
        if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS) {
          return absl::UnimplementedError(absl::StrCat(
              "node '", n.name(), "' (", n.op_type(), "): its attribute '", a.name(),
              "' is a subgraph; control flow other than If and Loop (Scan) is not supported"));
        }
        absl::StatusOr<kernels::AttrValue> value = ConvertAttribute(a);
        if (!value.ok()) {
          return Prefixed(value.status(), absl::StrCat("node '", n.name(), "' (", n.op_type(), ")"));
        }
        nd.attrs.emplace(a.name(), *std::move(value));
      }
      def_->nodes.push_back(std::move(nd));
    }
    return absl::OkStatus();
  }

 private:
  // `name` as the graph knows it: renamed where a subgraph defined it, else unchanged
  // ("", an absent input, stays "").
  static std::string Name(const Scope& scope, const std::string& name) {
    auto it = scope.renamed.find(name);
    return it == scope.renamed.end() ? name : it->second;
  }

  // A scope nested in `outer` whose own names are those of `g` (inputs, initializers,
  // node outputs), prefixed with `prefix`.
  static Scope Inner(const Scope& outer, const onnx::GraphProto& g, std::string prefix) {
    Scope inner;
    inner.renamed = outer.renamed;
    inner.guards = outer.guards;
    inner.loop = outer.loop;
    inner.prefix = std::move(prefix);
    auto define = [&](const std::string& local) {
      if (!local.empty()) inner.renamed[local] = inner.prefix + local;
    };
    for (const onnx::ValueInfoProto& in : g.input()) define(in.name());
    for (const onnx::TensorProto& t : g.initializer()) define(t.name());
    for (const onnx::NodeProto& n : g.node()) {
      for (const std::string& out : n.output()) define(out);
    }
    return inner;
  }

  absl::Status AddInitializers(onnx::GraphProto& g, const Scope& inner, absl::string_view where,
                               absl::string_view what) {
    if (g.sparse_initializer_size() > 0) {
      return absl::UnimplementedError(
          absl::StrCat(where, ": sparse initializer in ", what, " is not supported"));
    }
    for (onnx::TensorProto& t : *g.mutable_initializer()) {
      Initializer init;
      NDS_RETURN_IF_ERROR(Prefixed(ConvertInitializer(t, &init), where));
      init.name = Name(inner, t.name());
      def_->initializers.push_back(std::move(init));
    }
    return absl::OkStatus();
  }

  absl::Status AddIf(onnx::NodeProto& n, const Scope& scope) {
    const std::string label = n.name().empty() ? absl::StrCat("If_", ifs_) : n.name();
    ++ifs_;
    const std::string where = absl::StrCat("node '", label, "' (If)");
    if (n.input_size() != 1 || n.input(0).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": If takes one input, the condition"));
    }
    onnx::GraphProto* branches[2] = {nullptr, nullptr};  // then, else
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      const int b = a.name() == "then_branch" ? 0 : a.name() == "else_branch" ? 1 : -1;
      if (b < 0 || a.type() != onnx::AttributeProto::GRAPH || !a.has_g()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": unexpected attribute '", a.name(), "'"));
      }
      branches[b] = a.mutable_g();
    }
    if (branches[0] == nullptr || branches[1] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": needs both then_branch and else_branch"));
    }
    const std::string cond = Name(scope, n.input(0));
    NodeDef select;
    select.name = scope.prefix + label;
    select.op_type = "If";
    select.inputs.push_back(cond);
    select.guards = scope.guards;
    select.loop = scope.loop;
    for (int b = 0; b < 2; ++b) {
      onnx::GraphProto& g = *branches[b];
      const char* side = b == 0 ? "then" : "else";
      if (g.input_size() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": its ", side, "_branch declares inputs; If branches take none"));
      }
      if (g.output_size() != n.output_size()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: its %s_branch has %d outputs, the node %d", where, side,
                            g.output_size(), n.output_size()));
      }
      Scope inner = Inner(scope, g, absl::StrCat(scope.prefix, label, "/", side, "/"));
      inner.guards.emplace_back(cond, b == 0);
      NDS_RETURN_IF_ERROR(AddInitializers(g, inner, where, absl::StrCat(side, "_branch")));
      NDS_RETURN_IF_ERROR(AddNodes(g, inner));
      for (const onnx::ValueInfoProto& out : g.output()) {
        select.inputs.push_back(Name(inner, out.name()));
      }
    }
    for (const std::string& out : n.output()) select.outputs.push_back(Name(scope, out));
    def_->nodes.push_back(std::move(select));
    return absl::OkStatus();
  }

  // The value of a one-element initializer named `name` (a graph name), as int64.
  std::optional<int64_t> ConstantScalar(const std::string& name) const {
    for (auto it = def_->initializers.rbegin(); it != def_->initializers.rend(); ++it) {
      if (it->name != name) continue;
      if (kernels::NumElements(it->shape) != 1) return std::nullopt;
      if (it->dtype == DType::kInt64 && it->bytes.size() == 8) {
        int64_t v;
        std::memcpy(&v, it->bytes.data(), 8);
        return v;
      }
      if (it->dtype == DType::kInt32 && it->bytes.size() == 4) {
        int32_t v;
        std::memcpy(&v, it->bytes.data(), 4);
        return v;
      }
      if (it->dtype == DType::kBool && it->bytes.size() == 1) return it->bytes[0] != 0;
      return std::nullopt;
    }
    return std::nullopt;
  }

  std::string FreshName(const Scope& scope, absl::string_view what) {
    return absl::StrCat(scope.prefix, "ndserve.", what, "_", fresh_++);
  }

  void AddPlainNode(const Scope& scope, std::string name, std::string op,
                    std::vector<std::string> inputs, std::string output,
                    kernels::AttrMap attrs = {}) {
    NodeDef nd;
    nd.name = std::move(name);
    nd.op_type = std::move(op);
    nd.inputs = std::move(inputs);
    nd.outputs = {std::move(output)};
    nd.attrs = std::move(attrs);
    nd.guards = scope.guards;
    nd.loop = scope.loop;
    def_->nodes.push_back(std::move(nd));
  }

  // [x0, x1, ...] stacked along a new axis or concatenated along `axis`: Unsqueezes and
  // one Concat.
  void AddConcat(const Scope& scope, const std::string& label,
                 const std::vector<std::string>& parts, int64_t axis, bool new_axis,
                 const std::string& out) {
    std::vector<std::string> inputs;
    if (new_axis) {
      const std::string axes = FreshName(scope, "axes");
      Initializer init = ScalarInitializer(axes, DType::kInt64, &axis, sizeof(axis));
      init.shape = {1};
      def_->initializers.push_back(std::move(init));
      for (const std::string& p : parts) {
        inputs.push_back(FreshName(scope, "unsqueezed"));
        AddPlainNode(scope, absl::StrCat(label, "/unsqueeze_", inputs.size()), "Unsqueeze",
                     {p, axes}, inputs.back());
      }
    } else {
      inputs = parts;
    }
    kernels::AttrMap attrs;
    attrs["axis"] = axis;
    AddPlainNode(scope, absl::StrCat(label, "/concat"), "Concat", std::move(inputs), out,
                 std::move(attrs));
  }

  // Sequences whose length and elements the loader knows (SequenceEmpty, SequenceConstruct,
  // SequenceInsert, an unrolled Loop's appends): each is a list of tensor names, and the
  // ops that read one become plain nodes. torch.tensor_split and lists of a fixed length
  // export so (torchvision's MViT).
  absl::Status AddSequenceOp(onnx::NodeProto& n, const Scope& scope) {
    const std::string label = scope.prefix + (n.name().empty() ? n.op_type() : n.name());
    const std::string where = absl::StrCat("node '", n.name(), "' (", n.op_type(), ")");
    const absl::Status unsupported = absl::UnimplementedError(absl::StrCat(
        where,
        ": sequences are supported only as a list a Loop appends to and ConcatFromSequence "
        "reads after it (torch's outs.append(x) then torch.stack(outs) or torch.cat(outs)), "
        "or as a list of a length known at load"));
    auto list_of = [&](const std::string& local) -> const std::vector<std::string>* {
      auto it = sequences_.find(Name(scope, local));
      return it == sequences_.end() ? nullptr : &it->second;
    };
    auto int_attr = [&](const char* name, int64_t fallback) {
      for (const onnx::AttributeProto& a : n.attribute()) {
        if (a.name() == name) return static_cast<int64_t>(a.i());
      }
      return fallback;
    };
    if (n.output_size() != 1 || n.output(0).empty()) return unsupported;
    const std::string out = Name(scope, n.output(0));
    const std::string& op = n.op_type();
    if (op == "SequenceEmpty") {
      sequences_[out] = {};
      return absl::OkStatus();
    }
    if (op == "SequenceConstruct") {
      std::vector<std::string> items;
      for (const std::string& in : n.input()) items.push_back(Name(scope, in));
      sequences_[out] = std::move(items);
      return absl::OkStatus();
    }
    if (n.input_size() < 1) return unsupported;
    const std::vector<std::string>* list = list_of(n.input(0));
    if (list == nullptr) return unsupported;
    const int64_t size = static_cast<int64_t>(list->size());
    auto position = [&](int input, int64_t fallback, int64_t limit) -> std::optional<int64_t> {
      if (n.input_size() <= input || n.input(input).empty()) return fallback;
      std::optional<int64_t> v = ConstantScalar(Name(scope, n.input(input)));
      if (!v.has_value()) return std::nullopt;
      const int64_t p = *v < 0 ? *v + size : *v;
      if (p < 0 || p > limit) return std::nullopt;
      return p;
    };
    if (op == "SequenceInsert" && n.input_size() >= 2) {
      std::optional<int64_t> at = position(2, size, size);
      if (!at.has_value()) return unsupported;
      std::vector<std::string> items = *list;
      items.insert(items.begin() + *at, Name(scope, n.input(1)));
      sequences_[out] = std::move(items);
      return absl::OkStatus();
    }
    if (op == "SequenceAt" && n.input_size() == 2) {
      std::optional<int64_t> at = position(1, 0, size - 1);
      if (!at.has_value() || size == 0) return unsupported;
      AddPlainNode(scope, label, "Identity", {(*list)[*at]}, out);
      return absl::OkStatus();
    }
    if (op == "SequenceLength") {
      def_->initializers.push_back(ScalarInitializer(out, DType::kInt64, &size, sizeof(size)));
      return absl::OkStatus();
    }
    if (op == "ConcatFromSequence" && size > 0) {
      AddConcat(scope, label, *list, int_attr("axis", 0), int_attr("new_axis", 0) != 0, out);
      return absl::OkStatus();
    }
    return unsupported;
  }

  // A Loop with a trip count and conditions known at load that carries a list of a known
  // length: its iterations are inlined one after the other (names under
  // "<Loop>/iter<t>/"), so the list stays one the loader knows.
  absl::StatusOr<bool> TryUnroll(onnx::NodeProto& n, const Scope& scope, const std::string& label,
                                 onnx::GraphProto& body) {
    const int carried = n.input_size() - 2;
    bool carries_list = false;
    for (int j = 0; j < carried; ++j) {
      carries_list = carries_list || sequences_.contains(Name(scope, n.input(2 + j)));
    }
    if (!carries_list) return false;
    std::optional<int64_t> trips =
        n.input(0).empty() ? std::nullopt : ConstantScalar(Name(scope, n.input(0)));
    std::optional<int64_t> cond =
        n.input(1).empty() ? std::optional<int64_t>(1) : ConstantScalar(Name(scope, n.input(1)));
    constexpr int64_t kMaxUnrolledNodes = 20000;
    if (!trips.has_value() || *trips < 1 || !cond.has_value() || *cond == 0 ||
        *trips * std::max(body.node_size(), 1) > kMaxUnrolledNodes) {
      return false;
    }
    // The body's condition: its own input passed on, or true, directly or via an Identity.
    std::string cond_out = body.output(0).name();
    for (const onnx::NodeProto& bn : body.node()) {
      if (IsOp(bn, "Identity") && bn.output_size() == 1 && bn.output(0) == cond_out) {
        cond_out = bn.input(0);
      }
    }
    const bool passes_cond = cond_out == body.input(1).name();
    if (!passes_cond) {
      std::optional<int64_t> v = ConstantScalar(Name(scope, cond_out));
      if (!v.has_value() || *v == 0) return false;
    }
    const int scans = n.output_size() - carried;
    std::vector<std::string> state;
    for (int j = 0; j < carried; ++j) state.push_back(Name(scope, n.input(2 + j)));
    std::vector<std::vector<std::string>> parts(scans);
    const std::string where = absl::StrCat("node '", label, "' (Loop)");
    for (int64_t t = 0; t < *trips; ++t) {
      onnx::GraphProto g = body;  // each iteration moves its own tensors' bytes
      Scope inner = Inner(scope, g, absl::StrCat(scope.prefix, label, "/iter", t, "/"));
      const std::string iter = Name(inner, g.input(0).name());
      def_->initializers.push_back(ScalarInitializer(iter, DType::kInt64, &t, sizeof(t)));
      const uint8_t yes = 1;
      def_->initializers.push_back(
          ScalarInitializer(Name(inner, g.input(1).name()), DType::kBool, &yes, 1));
      for (int j = 0; j < carried; ++j) inner.renamed[g.input(2 + j).name()] = state[j];
      NDS_RETURN_IF_ERROR(AddInitializers(g, inner, where, "its body"));
      NDS_RETURN_IF_ERROR(AddNodes(g, inner));
      for (int j = 0; j < carried; ++j) state[j] = Name(inner, g.output(1 + j).name());
      for (int k = 0; k < scans; ++k) parts[k].push_back(Name(inner, g.output(1 + carried + k).name()));
    }
    for (int j = 0; j < carried; ++j) {
      if (n.output(j).empty()) continue;
      const std::string out = Name(scope, n.output(j));
      if (auto it = sequences_.find(state[j]); it != sequences_.end()) {
        std::vector<std::string> items = it->second;
        sequences_[out] = std::move(items);
      } else {
        AddPlainNode(scope, absl::StrCat(scope.prefix, label, "/out_", j), "Identity", {state[j]},
                     out);
      }
    }
    for (int k = 0; k < scans; ++k) {
      if (n.output(carried + k).empty()) continue;
      AddConcat(scope, absl::StrCat(scope.prefix, label, "/scan_", k), parts[k], 0, true,
                Name(scope, n.output(carried + k)));
    }
    return true;
  }

  absl::Status AddLoop(onnx::NodeProto& n, const Scope& scope) {
    const std::string label = n.name().empty() ? absl::StrCat("Loop_", loops_) : n.name();
    ++loops_;
    const std::string where = absl::StrCat("node '", label, "' (Loop)");
    if (n.input_size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": a Loop takes a trip count and a condition (either may be ''), then its "
                 "carried values"));
    }
    onnx::GraphProto* body = nullptr;
    std::vector<int64_t> list_axes, list_new_axis;
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.name() == "body" && a.type() == onnx::AttributeProto::GRAPH && a.has_g()) {
        body = a.mutable_g();
      } else if (a.name() == kListAxesAttr) {
        list_axes.assign(a.ints().begin(), a.ints().end());
      } else if (a.name() == kListNewAxisAttr) {
        list_new_axis.assign(a.ints().begin(), a.ints().end());
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": unexpected attribute '", a.name(), "'"));
      }
    }
    if (body == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, ": has no body"));
    const int carried = n.input_size() - 2;
    const int outputs = n.output_size();
    if (outputs < carried) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the node has %d outputs, fewer than its %d carried values", where, outputs, carried));
    }
    const int scans = outputs - carried;
    if (body->input_size() != 2 + carried) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: its body takes %d inputs, the node needs %d (iteration, condition and %d carried "
          "values)",
          where, body->input_size(), 2 + carried, carried));
    }
    if (body->output_size() != 1 + outputs) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: its body has %d outputs, the node needs %d (condition, %d carried values and %d "
          "scan outputs)",
          where, body->output_size(), 1 + outputs, carried, scans));
    }
    for (const onnx::ValueInfoProto& in : body->input()) {
      if (in.name().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": a body input has no name"));
      }
    }
    for (int j = 0; j < carried; ++j) {
      if (n.input(2 + j).empty()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: carried value %d has no initial value", where, j));
      }
    }
    NDS_ASSIGN_OR_RETURN(const bool unrolled, TryUnroll(n, scope, label, *body));
    if (unrolled) return absl::OkStatus();
    for (int j = 0; j < carried; ++j) {
      if (sequences_.contains(Name(scope, n.input(2 + j)))) {
        return absl::UnimplementedError(absl::StrCat(
            where, ": carries a sequence through iterations whose number is known only at run "
                   "time, other than a list it appends to and ConcatFromSequence reads after it"));
      }
    }

    const int id = static_cast<int>(def_->loops.size());
    Scope inner = Inner(scope, *body, absl::StrCat(scope.prefix, label, "/body/"));
    inner.loop = id;
    LoopDef loop;
    loop.id = id;
    loop.iter = Name(inner, body->input(0).name());
    loop.cond = Name(inner, body->input(1).name());
    for (int j = 0; j < carried; ++j) loop.carried.push_back(Name(inner, body->input(2 + j).name()));
    def_->loops.push_back(loop);

    // An absent trip count has no limit and an absent condition is true (ONNX's Loop).
    std::string max_trip = Name(scope, n.input(0));
    if (max_trip.empty()) {
      const int64_t unlimited = std::numeric_limits<int64_t>::max();
      max_trip = absl::StrCat(scope.prefix, label, "/no_trip_count");
      def_->initializers.push_back(
          ScalarInitializer(max_trip, DType::kInt64, &unlimited, sizeof(unlimited)));
    }
    std::string cond = Name(scope, n.input(1));
    if (cond.empty()) {
      const uint8_t yes = 1;
      cond = absl::StrCat(scope.prefix, label, "/no_condition");
      def_->initializers.push_back(ScalarInitializer(cond, DType::kBool, &yes, 1));
    }

    const std::size_t first_init = def_->initializers.size();
    const std::size_t first_node = def_->nodes.size();
    NDS_RETURN_IF_ERROR(AddInitializers(*body, inner, where, "its body"));
    NDS_RETURN_IF_ERROR(AddNodes(*body, inner));

    NodeDef node;
    node.name = scope.prefix + label;
    node.op_type = "Loop";
    node.guards = scope.guards;
    node.loop = scope.loop;
    node.inputs = {max_trip, cond};
    for (int j = 0; j < carried; ++j) node.inputs.push_back(Name(scope, n.input(2 + j)));
    for (const onnx::ValueInfoProto& out : body->output()) {
      node.inputs.push_back(Name(inner, out.name()));
    }
    // The outer values the body reads, so that they are computed before the Loop runs
    // and live until it is done.
    absl::flat_hash_set<std::string> defined(loop.carried.begin(), loop.carried.end());
    defined.insert(loop.iter);
    defined.insert(loop.cond);
    for (std::size_t i = first_init; i < def_->initializers.size(); ++i) {
      defined.insert(def_->initializers[i].name);
    }
    for (std::size_t i = first_node; i < def_->nodes.size(); ++i) {
      defined.insert(def_->nodes[i].outputs.begin(), def_->nodes[i].outputs.end());
    }
    for (std::size_t l = id + 1; l < def_->loops.size(); ++l) {
      const LoopDef& nested = def_->loops[l];
      defined.insert(nested.iter);
      defined.insert(nested.cond);
      defined.insert(nested.carried.begin(), nested.carried.end());
    }
    absl::flat_hash_set<std::string> captured;
    auto capture = [&](const std::string& name) {
      if (!name.empty() && !defined.contains(name) && captured.insert(name).second) {
        node.inputs.push_back(name);
      }
    };
    for (std::size_t i = first_node; i < def_->nodes.size(); ++i) {
      for (const std::string& in : def_->nodes[i].inputs) capture(in);
      for (const auto& [c, taken] : def_->nodes[i].guards) capture(c);
    }
    for (const std::string& out : n.output()) node.outputs.push_back(Name(scope, out));

    // Scan outputs: the Loop's own stack along a new axis 0; the lists the rewrite turned
    // into scan outputs (the last ones) concatenate or stack along their axis.
    const int lists = static_cast<int>(list_axes.size());
    if (lists > scans || list_new_axis.size() != list_axes.size()) {
      return absl::InternalError(absl::StrCat(where, ": the list rewrite left ", lists,
                                              " scan outputs of ", scans));
    }
    std::vector<int64_t> axes(scans, 0), new_axis(scans, 1), dtypes(scans, 0), dims;
    for (int k = 0; k < scans; ++k) {
      const int list = k - (scans - lists);
      if (list >= 0) {
        axes[k] = list_axes[list];
        new_axis[k] = list_new_axis[list] != 0;
      }
      const onnx::TypeProto& type = body->output(1 + carried + k).type();
      if (type.has_tensor_type()) {
        dtypes[k] = type.tensor_type().elem_type();
        if (type.tensor_type().has_shape()) {
          dims.push_back(type.tensor_type().shape().dim_size());
          for (const onnx::TensorShapeProto::Dimension& d : type.tensor_type().shape().dim()) {
            dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : -1);
          }
          continue;
        }
      }
      dims.push_back(-1);  // rank unknown
    }
    node.attrs[kLoopIdAttr] = static_cast<int64_t>(id);
    node.attrs[kLoopCarriedAttr] = static_cast<int64_t>(carried);
    node.attrs[kScanAxesAttr] = std::move(axes);
    node.attrs[kScanNewAxisAttr] = std::move(new_axis);
    node.attrs[kScanDTypesAttr] = std::move(dtypes);
    node.attrs[kScanDimsAttr] = std::move(dims);
    def_->nodes.push_back(std::move(node));
    return absl::OkStatus();
  }

  GraphDef* def_;
  int ifs_ = 0;
  int loops_ = 0;
  int fresh_ = 0;
  // Sequences of a length known at load: graph name -> its elements' graph names.
  absl::flat_hash_map<std::string, std::vector<std::string>> sequences_;
};

}  // namespace

absl::Status InlineSubgraphs(onnx::GraphProto& graph, GraphDef* def) {
  SubgraphInliner inliner(def);
  return inliner.AddNodes(graph, SubgraphInliner::Scope());
}

}  // namespace ndserve::engine
