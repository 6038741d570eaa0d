// The graph handling PyTorch exporters rely on (tests/fixtures/graphs, written by
// tools/gen_models.py): Constant nodes of every kind, Identity and Dropout removal,
// constant folding, shape arithmetic evaluated on the host per request with the
// request's own batch and sequence length, metadata with dynamic dims, and the load's
// warm-up of graphs that refuse its made-up dims.

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "engine/graph.h"
#include "engine/onnx_loader.h"
#include "engine/served_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::SourceDir;

std::filesystem::path GraphDir(const std::string& name) {
  return SourceDir() / "tests/fixtures/graphs" / name;
}

// One memory system for every model these tests load; it outlives them all.
MemorySystem* TestMemory() {
  static MemorySystem* memory = new MemorySystem();
  return memory;
}

std::shared_ptr<ServedModel> LoadGraphModel(const std::string& name) {
  ModelLoadSpec spec;
  spec.name = name;
  spec.model_path = (GraphDir(name) / "model.onnx").string();
  spec.device = Device::Cpu();
  absl::StatusOr<std::shared_ptr<ServedModel>> served = ServedModel::Load(spec, TestMemory());
  EXPECT_TRUE(served.ok()) << served.status();
  return served.value_or(nullptr);
}

// Runs every reference case under the model's fixture folder; returns how many ran.
int ExpectReferenceOutputs(ServedModel& model, const std::string& name) {
  int cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(GraphDir(name))) {
    if (!entry.is_directory()) continue;
    const testing::Case c = testing::ReadCase(entry.path());
    absl::StatusOr<InferenceResponse> r = model.Infer(testing::MakeRequest(c, name));
    EXPECT_TRUE(r.ok()) << c.name << ": " << r.status();
    if (!r.ok()) continue;
    EXPECT_EQ(r->outputs.size(), c.outputs.size());
    for (size_t i = 0; i < c.outputs.size() && i < r->outputs.size(); ++i) {
      EXPECT_TRUE(testing::OutputMatches(r->outputs[i], c.outputs[i], c.atol, c.rtol)) << c.name;
    }
    ++cases;
  }
  return cases;
}

Graph LoadGraph(const std::string& name) {
  absl::StatusOr<Graph> g = LoadOnnxGraph((GraphDir(name) / "model.onnx").string());
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

TEST(ConstantNodeTest, EveryAttributeKindBecomesAnInitializer) {
  const Graph g = LoadGraph("constants");
  for (const Node& node : g.nodes()) EXPECT_NE(node.name.substr(0, 2), "c_") << node.name;
  // Cast(c_i32) reads only a Constant, so it was folded into the output 'w'.
  EXPECT_EQ(g.folded_nodes(), 1);
  EXPECT_EQ(g.nodes().size(), 7u);
  const int w = g.FindValue("w");
  ASSERT_NE(w, kNoValue);
  EXPECT_EQ(g.values()[w].source, ValueSource::kInitializer);
  // value_ints went into Unsqueeze's attributes, so no value is left for it.
  EXPECT_EQ(g.FindValue("c_ints"), kNoValue);

  std::shared_ptr<ServedModel> model = LoadGraphModel("constants");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(ExpectReferenceOutputs(*model, "constants"), 1);
}

TEST(ConstantNodeTest, SparseAndStringValuesAreUnimplementedNamingTheNode) {
  for (const auto& [file, node] : {std::pair{"constant_sparse.onnx", "'sparse_c'"},
                                   std::pair{"constant_string.onnx", "'string_c'"}}) {
    absl::StatusOr<Graph> g = LoadOnnxGraph((SourceDir() / "tests/fixtures/bad" / file).string());
    ASSERT_FALSE(g.ok()) << file;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented) << g.status();
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(node));
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("(Constant)"));
  }
}

TEST(IdentityRemovalTest, ConsumersReadTheInputAndGraphOutputsKeepTheirNames) {
  const Graph g = LoadGraph("dropout_identity");
  // Relu, plus one aliasing Identity per graph output an Identity or Dropout produced.
  ASSERT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.nodes()[0].op, kernels::OpKind::kRelu);
  EXPECT_EQ(g.values()[g.nodes()[0].inputs[0]].name, "x");
  for (int i = 1; i < 3; ++i) EXPECT_EQ(g.nodes()[i].op, kernels::OpKind::kIdentity);
  EXPECT_EQ(g.outputs()[0].name, "y");
  EXPECT_EQ(g.outputs()[1].name, "y2");

  std::shared_ptr<ServedModel> model = LoadGraphModel("dropout_identity");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(ExpectReferenceOutputs(*model, "dropout_identity"), 1);
}

TEST(IdentityRemovalTest, ChainsInAnyFileOrderCollapseToTheirSource) {
  GraphDef def;
  def.name = "chain";
  def.opset = 13;
  def.inputs.push_back({"x", DType::kFp32, {2}});
  def.outputs.push_back({"y", DType::kFp32, {2}});
  def.nodes.push_back({"relu", "Relu", "", {"b"}, {"y"}, {}});
  def.nodes.push_back({"drop", "Dropout", "", {"a"}, {"b", "unread_mask"}, {}});
  def.nodes.push_back({"id", "Identity", "", {"x"}, {"a"}, {}});
  absl::StatusOr<Graph> g = Graph::Build(std::move(def));
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->nodes().size(), 1u);
  EXPECT_EQ(g->values()[g->nodes()[0].inputs[0]].name, "x");
  EXPECT_EQ(g->FindValue("a"), kNoValue);
  EXPECT_EQ(g->FindValue("b"), kNoValue);
}

TEST(IdentityRemovalTest, AUsedDropoutMaskIsUnimplemented) {
  absl::StatusOr<Graph> g =
      LoadOnnxGraph((SourceDir() / "tests/fixtures/bad/dropout_mask.onnx").string());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("node 'drop' (Dropout)"));
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("mask output 'mask'"));
}

TEST(ConstantFoldingTest, WeightArithmeticRunsOnceAtLoad) {
  const Graph g = LoadGraph("folding");
  // Add, Transpose, Mul over initializers and Constants are gone; MatMul remains.
  EXPECT_EQ(g.folded_nodes(), 3);
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0].op, kernels::OpKind::kMatMul);
  ASSERT_EQ(g.initializers().size(), 1u);
  EXPECT_EQ(g.initializers()[0].name, "w");
  EXPECT_FALSE(g.initializers()[0].read_on_host);
  Graph released = LoadGraph("folding");
  released.ReleaseInitializerBytes();  // only the device reads w
  EXPECT_TRUE(released.initializers()[0].bytes.empty());

  std::shared_ptr<ServedModel> model = LoadGraphModel("folding");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(ExpectReferenceOutputs(*model, "folding"), 1);
}

TEST(ConstantFoldingTest, OutputsPastTheBoundStayNodes) {
  GraphDef def;
  def.name = "big";
  def.opset = 17;
  const int64_t n = (kMaxFoldedBytes / 4) + 1;  // FP32 elements: one past the bound
  Initializer a;
  a.name = "a";
  a.dtype = DType::kFp32;
  a.shape = {n};
  a.bytes.assign(n * 4, '\0');
  def.initializers.push_back(a);
  def.outputs.push_back({"y", DType::kFp32, {n}});
  def.nodes.push_back({"relu", "Relu", "", {"a"}, {"y"}, {}});
  absl::StatusOr<Graph> g = Graph::Build(std::move(def));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->folded_nodes(), 0);
  EXPECT_EQ(g->nodes().size(), 1u);
}

TEST(HostShapeArithmeticTest, PlacesShapeArithmeticOnTheHost) {
  const Graph g = LoadGraph("shape_reshape");
  auto node = [&](absl::string_view name) -> const Node& {
    for (const Node& n : g.nodes()) {
      if (n.name == name) return n;
    }
    ADD_FAILURE() << "no node " << name;
    return g.nodes()[0];
  };
  for (const char* host :
       {"shape", "gather_batch", "gather_seq", "unsqueeze_batch", "unsqueeze_seq", "concat", "rows",
        "unsqueeze_rows", "concat_flat", "size"}) {
    EXPECT_TRUE(node(host).on_host) << host;
  }
  for (const char* device :
       {"reshape_heads", "transpose", "reshape_flat", "cast_seq", "scale_by_seq"}) {
    EXPECT_FALSE(node(device).on_host) << device;
  }
  // Host nodes read these initializers as data: their host bytes survive the upload.
  Graph released = LoadGraph("shape_reshape");
  released.ReleaseInitializerBytes();
  for (const char* name : {"i0", "i1", "heads", "width"}) {
    const int v = released.FindValue(name);
    ASSERT_NE(v, kNoValue) << name;
    const Initializer& init = released.initializers()[released.values()[v].index];
    EXPECT_TRUE(init.read_on_host) << name;
    EXPECT_EQ(init.bytes.size(), kernels::NumElements(init.shape) * 8u) << name;
  }
  // The Reshapes' shapes are computed per request.
  EXPECT_TRUE(node("reshape_heads").has_dynamic_attrs());
  EXPECT_TRUE(node("reshape_flat").has_dynamic_attrs());
  // Constant host inputs are still folded into the attributes once, at load.
  EXPECT_FALSE(node("transpose").has_dynamic_attrs());
  EXPECT_FALSE(node("unsqueeze_batch").has_dynamic_attrs());
  EXPECT_TRUE(std::holds_alternative<kernels::UnsqueezeAttrs>(node("unsqueeze_batch").attrs));
}

TEST(HostShapeArithmeticTest, ReshapeFollowsEachRequestsBatchAndSequenceLength) {
  std::shared_ptr<ServedModel> model = LoadGraphModel("shape_reshape");
  ASSERT_NE(model, nullptr);
  // batch 1, 2, 3 and sequence length 3, 5, 7, one predictor: each request sees its own
  // dims, not the previous request's or the warm-up's.
  EXPECT_EQ(ExpectReferenceOutputs(*model, "shape_reshape"), 4);
  EXPECT_EQ(ExpectReferenceOutputs(*model, "shape_reshape"), 4);
}

// A shape computed from a graph input's values (torch.arange(lengths.max()), x[:, :n]) is
// read per request; a value that does not fit is that request's INVALID_ARGUMENT.
TEST(HostShapeArithmeticTest, AShapeComputedFromInputValuesIsReadPerRequest) {
  std::shared_ptr<ServedModel> model = LoadGraphModel("value_dependent_shape");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(ExpectReferenceOutputs(*model, "value_dependent_shape"), 2);
  testing::Case c = testing::ReadCase(GraphDir("value_dependent_shape") / "to_3x2");
  for (testing::CaseTensor& t : c.inputs) {
    if (t.name != "dims") continue;
    const int64_t wrong[2] = {4, 4};  // [5, 5]: 25 elements for x's 6
    std::memcpy(t.bytes.data(), wrong, sizeof(wrong));
  }
  absl::StatusOr<InferenceResponse> r = model->Infer(testing::MakeRequest(c, "value_dependent_shape"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("node 'reshape_by_values' (Reshape)"));
  EXPECT_EQ(ExpectReferenceOutputs(*model, "value_dependent_shape"), 2);
}

TEST(MetadataTest, DynamicAxesAreMinusOneUnderTheExportersNames) {
  testing::TempDir repo;
  std::filesystem::create_directories(repo.path() / "exported/1");
  std::filesystem::copy_file(GraphDir("shape_reshape") / "model.onnx",
                             repo.path() / "exported/1/model.onnx");
  EngineOptions options;
  options.model_repository = repo.path().string();
  options.device = Device::Cpu();
  Engine engine(options, TestMemory());
  ASSERT_TRUE(engine.LoadModel("exported").ok());
  absl::StatusOr<ModelMetadata> meta = engine.GetModelMetadata("exported");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->max_batch_size, 0);
  ASSERT_EQ(meta->inputs.size(), 1u);
  EXPECT_EQ(meta->inputs[0].name, "x");
  EXPECT_THAT(meta->inputs[0].dims, ElementsAre(-1, -1, 8));
  ASSERT_EQ(meta->outputs.size(), 4u);
  EXPECT_EQ(meta->outputs[0].name, "heads_first");
  EXPECT_THAT(meta->outputs[0].dims, ElementsAre(-1, 2, -1, 4));
  EXPECT_EQ(meta->outputs[1].name, "flat_x");
  EXPECT_THAT(meta->outputs[1].dims, ElementsAre(-1, 8));  // no dim_value, no dim_param
  EXPECT_EQ(meta->outputs[3].name, "numel");
  EXPECT_TRUE(meta->outputs[3].dims.empty());
  EXPECT_EQ(meta->outputs[3].dtype, DType::kInt64);

  // The auto-completed config says the same.
  absl::StatusOr<ModelConfig> config = engine.GetModelConfig("exported");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->inputs.size(), 1u);
  EXPECT_EQ(config->inputs[0].name, "x");
  EXPECT_THAT(config->inputs[0].dims, ElementsAre(-1, -1, 8));
  EXPECT_THAT(config->outputs[1].dims, ElementsAre(-1, 8));
}

// The load's warm-up makes up the variable dims. A graph that refuses ones (it reshapes
// into pairs) is warmed with longer dims instead; one that refuses every made-up length
// (a fixed 5) still loads, and serves the shapes it accepts.
TEST(WarmUpTest, AGraphRefusingUnitDimsWarmsUpWithLongerOnes) {
  std::shared_ptr<ServedModel> model = LoadGraphModel("warmup_even_length");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(ExpectReferenceOutputs(*model, "warmup_even_length"), 1);
}

TEST(WarmUpTest, AGraphRefusingEveryMadeUpShapeLoadsAndServesItsOwn) {
  std::shared_ptr<ServedModel> model = LoadGraphModel("warmup_fixed_length");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(ExpectReferenceOutputs(*model, "warmup_fixed_length"), 1);
}

}  // namespace
}  // namespace ndserve::engine
