#include "engine/onnx_loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/fusion.h"
#include "engine/half_precision.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "kernels/node_attrs.h"
#include "kernels/op_kind.h"
#include "onnx/onnx_pb.h"

namespace ndserve::engine {
namespace {

absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

bool IsDefaultDomain(absl::string_view domain) { return domain.empty() || domain == "ai.onnx"; }

absl::StatusOr<TensorSpec> ToTensorSpec(const onnx::ValueInfoProto& vi, absl::string_view kind) {
  TensorSpec spec;
  spec.name = vi.name();
  if (!vi.type().has_tensor_type()) {
    return absl::UnimplementedError(absl::StrCat(kind, " '", vi.name(),
                                                 "' is not a tensor (sequences and maps are not "
                                                 "supported)"));
  }
  const onnx::TypeProto::Tensor& tt = vi.type().tensor_type();
  absl::StatusOr<DType> dtype = kernels::DTypeFromOnnx(tt.elem_type());
  if (!dtype.ok()) return Prefixed(dtype.status(), absl::StrCat(kind, " '", vi.name(), "'"));
  spec.dtype = *dtype;
  if (!tt.has_shape()) {
    spec.any_rank = true;
    return spec;
  }
  for (const onnx::TensorShapeProto::Dimension& d : tt.shape().dim()) {
    spec.dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : kAnyDim);
  }
  return spec;
}

// Copies `n` typed values (as ONNX stores them) into `out` as `dtype`'s bytes.
template <typename Src>
void Narrow(const google::protobuf::RepeatedField<Src>& src, DType dtype, std::string* out) {
  const size_t size = DTypeSize(dtype);
  out->resize(src.size() * size);
  for (int i = 0; i < src.size(); ++i) {
    // Little-endian: the low `size` bytes of each value are the element (FP16/BF16 bit
    // patterns and small integers are stored widened to int32 / uint64).
    const Src v = src.Get(i);
    std::memcpy(out->data() + i * size, &v, size);
  }
}

// `where` names the tensor in errors; empty: "initializer '<name>'".
absl::Status ConvertInitializer(onnx::TensorProto& t, Initializer* out,
                                absl::string_view what = "") {
  const std::string where =
      what.empty() ? absl::StrCat("initializer '", t.name(), "'") : std::string(what);
  out->name = t.name();
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::UnimplementedError(absl::StrCat(where, ": external data files are not supported"));
  }
  if (t.has_segment()) {
    return absl::UnimplementedError(absl::StrCat(where, ": segmented tensors are not supported"));
  }
  absl::StatusOr<DType> dtype = kernels::DTypeFromOnnx(t.data_type());
  if (!dtype.ok()) return Prefixed(dtype.status(), where);
  if (*dtype == DType::kBytes) {
    return absl::UnimplementedError(absl::StrCat(where, ": STRING tensors are not supported"));
  }
  out->dtype = *dtype;
  out->shape.assign(t.dims().begin(), t.dims().end());
  NDS_RETURN_IF_ERROR(kernels::ValidateShape(out->shape, where));
  const int64_t numel = kernels::NumElements(out->shape);
  uint64_t expected = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), DTypeSize(out->dtype), &expected)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": too many elements"));
  }
  const std::string desc = absl::StrCat(DTypeName(out->dtype), kernels::ShapeToString(out->shape));
  if (t.has_raw_data()) {
    if (t.raw_data().size() != expected) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s has %d bytes of data, but %s needs %d", where, t.raw_data().size(), desc, expected));
    }
    out->bytes = std::move(*t.mutable_raw_data());
    return absl::OkStatus();
  }
  int64_t count = 0;
  switch (out->dtype) {
    case DType::kFp32:
      count = t.float_data_size();
      if (count == numel) {
        out->bytes.assign(reinterpret_cast<const char*>(t.float_data().data()), expected);
      }
      break;
    case DType::kFp64:
      count = t.double_data_size();
      if (count == numel) {
        out->bytes.assign(reinterpret_cast<const char*>(t.double_data().data()), expected);
      }
      break;
    case DType::kInt64:
      count = t.int64_data_size();
      if (count == numel) {
        out->bytes.assign(reinterpret_cast<const char*>(t.int64_data().data()), expected);
      }
      break;
    case DType::kUint32:
    case DType::kUint64:
      count = t.uint64_data_size();
      if (count == numel) Narrow(t.uint64_data(), out->dtype, &out->bytes);
      break;
    default:  // INT32, INT16, INT8, UINT16, UINT8, BOOL, FP16, BF16 live in int32_data.
      count = t.int32_data_size();
      if (count == numel) Narrow(t.int32_data(), out->dtype, &out->bytes);
      break;
  }
  if (count != numel) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s has %d values, but %s needs %d", where, count, desc, numel));
  }
  return absl::OkStatus();
}

absl::StatusOr<kernels::AttrValue> ConvertAttribute(const onnx::AttributeProto& a) {
  using AP = onnx::AttributeProto;
  AP::AttributeType type = a.type();
  if (type == AP::UNDEFINED) {  // very old writers leave `type` unset; infer it
    if (a.has_f()) type = AP::FLOAT;
    if (a.has_i()) type = AP::INT;
    if (a.has_s()) type = AP::STRING;
    if (a.floats_size() > 0) type = AP::FLOATS;
    if (a.ints_size() > 0) type = AP::INTS;
    if (a.has_t()) type = AP::TENSOR;
  }
  switch (type) {
    case AP::INT:
      return kernels::AttrValue(static_cast<int64_t>(a.i()));
    case AP::FLOAT:
      return kernels::AttrValue(a.f());
    case AP::STRING:
      return kernels::AttrValue(a.s());
    case AP::INTS:
      return kernels::AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case AP::FLOATS:
      return kernels::AttrValue(std::vector<float>(a.floats().begin(), a.floats().end()));
    case AP::TENSOR: {
      // Attribute tensors are small (ConstantOfShape's one element, a Constant's value);
      // the copy lets the initializer path take raw_data by move.
      onnx::TensorProto t = a.t();
      Initializer init;
      NDS_RETURN_IF_ERROR(
          ConvertInitializer(t, &init, absl::StrCat("tensor attribute '", a.name(), "'")));
      NDS_ASSIGN_OR_RETURN(
          kernels::HostValue v,
          kernels::HostValue::FromBytes(
              init.dtype, init.shape,
              absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(init.bytes.data()),
                                  init.bytes.size())));
      return kernels::AttrValue(std::move(v));
    }
    case AP::STRINGS: {
      // Lists of names (the recurrent ops' activations, which PyTorch always writes for
      // RNN) arrive as one STRING of the items joined by ','; the rules that read one
      // split it (kernels/rules/rnn.cc).
      std::string joined;
      for (const std::string& s : a.strings()) {
        if (!joined.empty()) joined += ',';
        joined += s;
      }
      return kernels::AttrValue(std::move(joined));
    }
    default:
      return absl::UnimplementedError(
          absl::StrFormat("attribute '%s' has type %s, which is not supported", a.name(),
                          AP::AttributeType_Name(type)));
  }
}

// A Constant node's value as an initializer named after its output, so everything
// downstream (host inputs, constant folding, upload) treats exporters' Constants exactly
// like graph initializers. Exactly one value attribute must be set.
absl::Status ConstantToInitializer(onnx::NodeProto& n, Initializer* out) {
  const std::string where = absl::StrCat("node '", n.name(), "' (Constant)");
  if (n.output_size() != 1 || n.output(0).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": a Constant has exactly one output"));
  }
  if (n.attribute_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: a Constant has exactly one value attribute, this one has %d", where,
                        n.attribute_size()));
  }
  onnx::AttributeProto& a = *n.mutable_attribute(0);
  const std::string& kind = a.name();
  out->name = n.output(0);
  if (kind == "value") {
    if (!a.has_t()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": attribute 'value' is not a tensor"));
    }
    // The converter names the tensor in its errors; Constants' tensors are often unnamed.
    a.mutable_t()->set_name(out->name);
    NDS_RETURN_IF_ERROR(Prefixed(ConvertInitializer(*a.mutable_t(), out), where));
    out->name = n.output(0);
    return absl::OkStatus();
  }
  auto set = [&](DType dtype, kernels::Shape shape, const void* data, size_t bytes) {
    out->dtype = dtype;
    out->shape = std::move(shape);
    out->bytes.assign(static_cast<const char*>(data), bytes);
  };
  if (kind == "value_float") {
    const float v = a.f();
    set(DType::kFp32, {}, &v, sizeof(v));
  } else if (kind == "value_int") {
    const int64_t v = a.i();
    set(DType::kInt64, {}, &v, sizeof(v));
  } else if (kind == "value_floats") {
    set(DType::kFp32, {a.floats_size()}, a.floats().data(), a.floats_size() * sizeof(float));
  } else if (kind == "value_ints") {
    set(DType::kInt64, {a.ints_size()}, a.ints().data(), a.ints_size() * sizeof(int64_t));
  } else if (kind == "sparse_value" || kind == "value_string" || kind == "value_strings") {
    return absl::UnimplementedError(absl::StrCat(
        where, ": attribute '", kind, "' is not supported (",
        kind == "sparse_value" ? "sparse tensors" : "STRING tensors", " cannot be served)"));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": unknown value attribute '", kind, "'"));
  }
  return absl::OkStatus();
}

// Appends a graph's nodes to a GraphDef, inlining each If: the nodes of both branches
// join the graph with guards (NodeDef::guards) naming the condition and the branch, and
// the If itself is left as [cond, then outputs..., else outputs...] -> outputs, so the
// engine runs the taken branch's nodes and hands its values on (docs/design.md §4).
// Names a branch defines get the prefix "<If>/then/" or "<If>/else/", so they cannot
// collide with the outer graph's or the other branch's; names it does not define are the
// enclosing scopes' (ONNX's outer-scope references).
class BranchInliner {
 public:
  struct Scope {
    absl::flat_hash_map<std::string, std::string> renamed;  // branch-local name -> graph name
    std::vector<std::pair<std::string, bool>> guards;
    std::string prefix;  // for node names and the names the scope defines
  };

  explicit BranchInliner(GraphDef* def) : def_(def) {}

  absl::Status AddNodes(onnx::GraphProto& graph, const Scope& scope) {
    for (onnx::NodeProto& n : *graph.mutable_node()) {
      if (n.op_type() == "Constant" && IsDefaultDomain(n.domain())) {
        Initializer init;
        NDS_RETURN_IF_ERROR(ConstantToInitializer(n, &init));
        init.name = Name(scope, init.name);
        def_->initializers.push_back(std::move(init));
        continue;
      }
      if (n.op_type() == "If" && IsDefaultDomain(n.domain())) {
        NDS_RETURN_IF_ERROR(AddIf(n, scope));
        continue;
      }
      NodeDef nd;
      nd.name = n.name().empty() ? n.name() : scope.prefix + n.name();
      nd.op_type = n.op_type();
      nd.domain = n.domain();
      for (const std::string& in : n.input()) nd.inputs.push_back(Name(scope, in));
      for (const std::string& out : n.output()) nd.outputs.push_back(Name(scope, out));
      nd.guards = scope.guards;
      for (const onnx::AttributeProto& a : n.attribute()) {
        // The engine's own rewrites (engine/fusion.h) mark nodes with these names.
        if (absl::StartsWith(a.name(), "ndserve.")) {
          return absl::InvalidArgumentError(
              absl::StrCat("node '", n.name(), "' (", n.op_type(), "): attribute '", a.name(),
                           "' uses the prefix 'ndserve.' reserved for the engine's own rewrites"));
        }
        if (a.type() == onnx::AttributeProto::GRAPH) {
          return absl::UnimplementedError(absl::StrCat(
              "node '", n.name(), "' (", n.op_type(), "): its attribute '", a.name(),
              "' is a subgraph; control flow other than If (Loop, Scan) is not supported"));
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
  // `name` as the graph knows it: renamed where a branch defined it, else unchanged ("",
  // an absent input, stays "").
  static std::string Name(const Scope& scope, const std::string& name) {
    auto it = scope.renamed.find(name);
    return it == scope.renamed.end() ? name : it->second;
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
      if (g.sparse_initializer_size() > 0) {
        return absl::UnimplementedError(absl::StrCat(where, ": sparse initializer in ", side,
                                                     "_branch is not supported"));
      }
      Scope inner;
      inner.renamed = scope.renamed;
      inner.guards = scope.guards;
      inner.guards.emplace_back(cond, b == 0);
      inner.prefix = absl::StrCat(scope.prefix, label, "/", side, "/");
      auto define = [&](const std::string& local) {
        if (!local.empty()) inner.renamed[local] = inner.prefix + local;
      };
      for (const onnx::TensorProto& t : g.initializer()) define(t.name());
      for (const onnx::NodeProto& bn : g.node()) {
        for (const std::string& out : bn.output()) define(out);
      }
      for (onnx::TensorProto& t : *g.mutable_initializer()) {
        Initializer init;
        NDS_RETURN_IF_ERROR(Prefixed(ConvertInitializer(t, &init), where));
        init.name = Name(inner, t.name());
        def_->initializers.push_back(std::move(init));
      }
      NDS_RETURN_IF_ERROR(AddNodes(g, inner));
      for (const onnx::ValueInfoProto& out : g.output()) {
        select.inputs.push_back(Name(inner, out.name()));
      }
    }
    for (const std::string& out : n.output()) select.outputs.push_back(Name(scope, out));
    def_->nodes.push_back(std::move(select));
    return absl::OkStatus();
  }

  GraphDef* def_;
  int ifs_ = 0;
};

absl::StatusOr<GraphDef> ToGraphDef(onnx::ModelProto& model) {
  if (!model.has_graph()) {
    return absl::InvalidArgumentError("not an ONNX model (it has no graph)");
  }
  GraphDef def;
  bool has_default = false;
  for (const onnx::OperatorSetIdProto& id : model.opset_import()) {
    if (IsDefaultDomain(id.domain())) {
      def.opset = static_cast<int>(id.version());
      has_default = true;
    }
  }
  if (!has_default) {
    return absl::InvalidArgumentError("the model imports no opset of domain 'ai.onnx'");
  }
  if (def.opset < kernels::kMinOpset || def.opset > kernels::kMaxOpset) {
    return absl::UnimplementedError(
        absl::StrFormat("unsupported opset %d of domain 'ai.onnx' (supported: %d to %d)", def.opset,
                        kernels::kMinOpset, kernels::kMaxOpset));
  }
  onnx::GraphProto& graph = *model.mutable_graph();
  def.name = graph.name();
  if (graph.sparse_initializer_size() > 0) {
    return absl::UnimplementedError(absl::StrCat(
        "sparse initializer '", graph.sparse_initializer(0).values().name(), "' is not supported"));
  }
  for (const onnx::ValueInfoProto& vi : graph.input()) {
    NDS_ASSIGN_OR_RETURN(TensorSpec spec, ToTensorSpec(vi, "graph input"));
    def.inputs.push_back(std::move(spec));
  }
  for (const onnx::ValueInfoProto& vi : graph.output()) {
    NDS_ASSIGN_OR_RETURN(TensorSpec spec, ToTensorSpec(vi, "graph output"));
    def.outputs.push_back(std::move(spec));
  }
  def.initializers.resize(graph.initializer_size());
  for (int i = 0; i < graph.initializer_size(); ++i) {
    NDS_RETURN_IF_ERROR(ConvertInitializer(*graph.mutable_initializer(i), &def.initializers[i]));
  }
  def.nodes.reserve(graph.node_size());
  BranchInliner inliner(&def);
  NDS_RETURN_IF_ERROR(inliner.AddNodes(graph, BranchInliner::Scope()));
  return def;
}

constexpr absl::string_view kParseError =
    "cannot parse as an ONNX model (the file is truncated or not an ONNX protobuf)";

}  // namespace

absl::StatusOr<GraphDef> ParseOnnxGraphDef(absl::string_view bytes, absl::string_view what) {
  if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty model"));
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", kParseError));
  }
  absl::StatusOr<GraphDef> def = ToGraphDef(model);
  if (!def.ok()) return Prefixed(def.status(), what);
  return def;
}

absl::StatusOr<GraphDef> ReadOnnxGraphDef(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string msg = absl::StrCat(path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::FailedPreconditionError(msg);
  }
  // Streamed from the descriptor: a 50 MB model is not held twice (file bytes + message).
  google::protobuf::io::FileInputStream in(fd);
  in.SetCloseOnDelete(true);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if (st.st_size == 0) return absl::InvalidArgumentError(absl::StrCat(path, ": empty file"));
  onnx::ModelProto model;
  if (!model.ParseFromZeroCopyStream(&in)) {
    if (in.GetErrno() != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": read error: ", std::strerror(in.GetErrno())));
    }
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", kParseError));
  }
  absl::StatusOr<GraphDef> def = ToGraphDef(model);
  if (!def.ok()) return Prefixed(def.status(), path);
  return def;
}

namespace {

absl::StatusOr<Graph> BuildGraph(GraphDef def, absl::string_view what) {
  // First, so that the fusions below see FP32 weights.
  absl::StatusOr<int> widened = ComputeHalfPrecisionInFp32(&def);
  if (!widened.ok()) return Prefixed(widened.status(), what);
  if (*widened > 0) {
    LOG(INFO) << what << ": FP16/BF16 model computed in FP32 (" << *widened
              << " initializers, inputs, outputs and attributes widened)";
  }
  absl::StatusOr<int> fused = FuseConvBatchNorm(&def);
  if (!fused.ok()) return Prefixed(fused.status(), what);
  absl::StatusOr<int> activations = FuseConvActivation(&def);
  if (!activations.ok()) return Prefixed(activations.status(), what);
  absl::StatusOr<int> epilogues = FuseGemmEpilogues(&def);
  if (!epilogues.ok()) return Prefixed(epilogues.status(), what);
  absl::StatusOr<int> bags = FuseEmbeddingBags(&def);
  if (!bags.ok()) return Prefixed(bags.status(), what);
  if (*fused > 0 || *activations > 0 || *epilogues > 0 || *bags > 0) {
    LOG(INFO) << what << ": fused " << *fused << " Conv+BatchNormalization and " << *activations
              << " Conv+activation pairs; " << *epilogues
              << " nodes folded into Gemm/MatMul epilogues; " << *bags << " embedding bags";
  }
  absl::StatusOr<Graph> graph = Graph::Build(std::move(def));
  if (!graph.ok()) return Prefixed(graph.status(), what);
  return graph;
}

}  // namespace

absl::StatusOr<Graph> LoadOnnxGraph(const std::string& path) {
  NDS_ASSIGN_OR_RETURN(GraphDef def, ReadOnnxGraphDef(path));
  return BuildGraph(std::move(def), path);
}

absl::StatusOr<Graph> LoadOnnxGraphFromBytes(absl::string_view bytes, absl::string_view what) {
  NDS_ASSIGN_OR_RETURN(GraphDef def, ParseOnnxGraphDef(bytes, what));
  return BuildGraph(std::move(def), what);
}

}  // namespace ndserve::engine
