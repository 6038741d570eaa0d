// ONNX loading and graph validation: the bad-model fixtures (tests/fixtures/bad) are load
// errors that name what is wrong, never a crash; good models become ordered graphs.

#include "engine/onnx_loader.h"

#include <string>

#include "absl/status/status.h"
#include "engine/graph.h"
#include "engine/served_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using ::testing::HasSubstr;
using testing::SourceDir;

std::string Bad(const std::string& name) {
  return (SourceDir() / "tests/fixtures/bad" / name).string();
}

struct BadCase {
  const char* file;
  absl::StatusCode code;
  const char* message;  // a substring the error must contain
};

class BadModelTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadModelTest, IsALoadErrorNamingTheProblem) {
  const BadCase& c = GetParam();
  absl::StatusOr<Graph> graph = LoadOnnxGraph(Bad(c.file));
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().code(), c.code) << graph.status();
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr(c.message));
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr(c.file));  // names the file

  // The same through a full model load: an error, nothing left allocated.
  ModelLoadSpec spec;
  spec.name = "bad";
  spec.model_path = Bad(c.file);
  MemorySystem memory;
  absl::StatusOr<std::shared_ptr<ServedModel>> model = ServedModel::Load(spec, &memory);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("failed to load model 'bad'"));
  EXPECT_THAT(std::string(model.status().message()), HasSubstr(c.message));
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, BadModelTest,
    ::testing::Values(
        BadCase{"truncated.onnx", absl::StatusCode::kInvalidArgument, "truncated"},
        BadCase{"bad_initializer.onnx", absl::StatusCode::kInvalidArgument,
                "initializer 'w' has 10 bytes of data, but FP32[4,4] needs 64"},
        BadCase{"unknown_op.onnx", absl::StatusCode::kUnimplemented, "unsupported operator 'Hardmax'"},
        BadCase{"custom_domain_op.onnx", absl::StatusCode::kUnimplemented,
                "'FancyRelu' of domain 'com.example'"},
        BadCase{"bad_tensor_attribute.onnx", absl::StatusCode::kInvalidArgument,
                "tensor attribute 'value' has 2 values, but FP32[1] needs 1"},
        BadCase{"missing_input.onnx", absl::StatusCode::kInvalidArgument, "missing input 'ghost'"},
        BadCase{"bad_opset.onnx", absl::StatusCode::kUnimplemented,
                "unsupported opset 9 of domain 'ai.onnx' (supported: 13 to 17)"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

TEST(OnnxLoaderTest, MissingFileIsNotFound) {
  absl::StatusOr<Graph> graph = LoadOnnxGraph("/nonexistent/model.onnx");
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr("/nonexistent/model.onnx"));
}

TEST(OnnxLoaderTest, EmptyAndGarbageFilesAreErrors) {
  testing::TempDir dir;
  testing::WriteFile(dir.path() / "empty.onnx", "");
  testing::WriteFile(dir.path() / "text.onnx", "this is not a protobuf at all\n\xff\xff\xff");
  EXPECT_THAT(std::string(LoadOnnxGraph((dir.path() / "empty.onnx").string()).status().message()),
              HasSubstr("empty file"));
  absl::Status garbage = LoadOnnxGraph((dir.path() / "text.onnx").string()).status();
  EXPECT_EQ(garbage.code(), absl::StatusCode::kInvalidArgument);
  // A directory is not a model either.
  EXPECT_FALSE(LoadOnnxGraph(dir.path().string()).ok());
  // Bytes in memory: every prefix of a good model is an error or a valid graph, never a
  // crash.
  const std::string good =
      testing::ReadFileOrDie(SourceDir() / "tests/fixtures/ops/gemm_c_scalar_transb/model.onnx");
  for (size_t n = 0; n < good.size(); n += 7) {
    absl::StatusOr<GraphDef> def = ParseOnnxGraphDef(absl::string_view(good).substr(0, n), "cut");
    if (def.ok()) Graph::Build(*std::move(def)).IgnoreError();
  }
}

TEST(OnnxLoaderTest, MlpBecomesAnOrderedGraph) {
  absl::StatusOr<Graph> graph =
      LoadOnnxGraph((SourceDir() / "examples/models/mlp/1/model.onnx").string());
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->opset(), 13);
  ASSERT_EQ(graph->inputs().size(), 1u);
  EXPECT_EQ(graph->inputs()[0].ToString(), "input FP32[-1,64]");
  EXPECT_EQ(graph->outputs()[0].ToString(), "probabilities FP32[-1,10]");
  // 3 x Gemm, Softmax: the two Relus are fused into the Gemms before them (engine/fusion.h).
  ASSERT_EQ(graph->nodes().size(), 4u);
  EXPECT_EQ(graph->nodes()[0].op, kernels::OpKind::kGemm);
  EXPECT_EQ(graph->nodes()[3].op, kernels::OpKind::kSoftmax);
  EXPECT_EQ(graph->initializers().size(), 6u);
  EXPECT_EQ(graph->InitializerBytes(), (64 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10) * 4u);
  const auto* gemm = std::get_if<kernels::GemmAttrs>(&graph->nodes()[0].attrs);
  ASSERT_NE(gemm, nullptr);
  EXPECT_TRUE(gemm->trans_b);
  EXPECT_EQ(gemm->epilogue.activation, kernels::GemmActivation::kRelu);
  const auto* last = std::get_if<kernels::GemmAttrs>(&graph->nodes()[2].attrs);
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->epilogue.activation, kernels::GemmActivation::kNone);
}

// A small graph built by hand, for the validation rules the fixtures do not cover.
GraphDef TinyGraph() {
  GraphDef def;
  def.name = "tiny";
  def.opset = 13;
  def.inputs.push_back({"x", DType::kFp32, {kAnyDim, 4}});
  def.outputs.push_back({"y", DType::kFp32, {kAnyDim, 2, 2}});
  Initializer shape;
  shape.name = "shape";
  shape.dtype = DType::kInt64;
  shape.shape = {3};
  const int64_t values[] = {0, 2, 2};
  shape.bytes.assign(reinterpret_cast<const char*>(values), sizeof(values));
  def.initializers.push_back(shape);
  def.nodes.push_back({"relu", "Relu", "", {"x"}, {"r"}, {}});
  def.nodes.push_back({"reshape", "Reshape", "", {"r", "shape"}, {"y"}, {}});
  return def;
}

TEST(GraphTest, FoldsShapeInputsAndAliasesShapeOnlyOps) {
  absl::StatusOr<Graph> g = Graph::Build(TinyGraph());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->initializers().empty());  // the shape went into the attributes
  const auto* reshape = std::get_if<kernels::ReshapeAttrs>(&g->nodes()[1].attrs);
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(reshape->shape, (std::vector<int64_t>{0, 2, 2}));
  EXPECT_EQ(g->nodes()[1].inputs.size(), 1u);
  // y aliases r's buffer, which is a graph output's storage: never released early.
  const Value& y = g->values()[g->FindValue("y")];
  EXPECT_EQ(y.storage, g->FindValue("r"));
  EXPECT_TRUE(g->ReleasedAfter(1).empty());
  // x is read last by node 0.
  EXPECT_EQ(g->ReleasedAfter(0).size(), 1u);
  EXPECT_EQ(g->ReleasedAfter(0)[0], g->FindValue("x"));
}

TEST(GraphTest, OrdersNodesTopologically) {
  GraphDef def = TinyGraph();
  std::swap(def.nodes[0], def.nodes[1]);
  absl::StatusOr<Graph> g = Graph::Build(std::move(def));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->nodes()[0].name, "relu");
}

TEST(GraphTest, RejectsWhatItCannotRun) {
  {
    GraphDef def = TinyGraph();
    def.nodes[0].inputs[0] = "r";  // relu reads its own output: a cycle
    def.inputs.clear();
    EXPECT_THAT(std::string(Graph::Build(std::move(def)).status().message()), HasSubstr("cycle"));
  }
  {
    GraphDef def = TinyGraph();
    def.nodes[1].outputs[0] = "r";  // produced twice
    EXPECT_THAT(std::string(Graph::Build(std::move(def)).status().message()),
                HasSubstr("also produced by node 'relu'"));
  }
  {
    GraphDef def = TinyGraph();
    def.outputs[0].name = "nowhere";
    EXPECT_THAT(std::string(Graph::Build(std::move(def)).status().message()),
                HasSubstr("graph output 'nowhere' is not produced"));
  }
  {
    GraphDef def = TinyGraph();
    def.nodes.push_back({"ln", "LayerNormalization", "", {"x", "x"}, {"z"}, {}});
    EXPECT_EQ(Graph::Build(std::move(def)).status().code(), absl::StatusCode::kUnimplemented);
  }
  {
    GraphDef def = TinyGraph();
    def.opset = 18;
    EXPECT_THAT(std::string(Graph::Build(std::move(def)).status().message()),
                HasSubstr("unsupported opset 18"));
  }
}

}  // namespace
}  // namespace ndserve::engine
