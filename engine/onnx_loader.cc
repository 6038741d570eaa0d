#include "engine/onnx_loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/fusion.h"
#include "engine/half_precision.h"
#include "engine/onnx_convert.h"
#include "engine/subgraph_inliner.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "kernels/node_attrs.h"
#include "kernels/op_kind.h"
#include "onnx/onnx_pb.h"

namespace ndserve::engine {
namespace {

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
  NDS_RETURN_IF_ERROR(InlineSubgraphs(graph, &def));
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
