// The PyTorch exports (tools/gen_torch_models.py) loaded by the engine from their
// repository with no config.pbtxt, as a user would bring them. A model that
// tests/fixtures/torch_unsupported.txt lists must fail to load with UNIMPLEMENTED or
// INVALID_ARGUMENT naming the node and its op (or the opset); any other model must load
// and match PyTorch's outputs on every input set. A listed model that loads and matches
// fails the test until it is taken off the list, so the list cannot go stale.
// CPU always; CUDA when a device is present.

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/engine.h"
#include "engine/fusion.h"
#include "engine/model.h"
#include "engine/onnx_loader.h"
#include "engine/predictor_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dispatch.h"
#include "memory/cuda_runtime.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "tests/torch/torch_fixtures.h"
#include "tests/unit/engine/cpu_graph_run.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

namespace tf = ::ndserve::torch_fixtures;

TEST(TorchFixtures, ArePresentAndListedModelsExist) {
  ASSERT_FALSE(tf::FixtureDir().empty()) << "NDSERVE_TORCH_FIXTURES is not set";
  ASSERT_TRUE(std::filesystem::exists(tf::FixtureDir() / "DONE"))
      << tf::FixtureDir() << " is not complete: build the target torch_fixtures "
      << "(/usr/bin/python3 tools/gen_torch_models.py)";
  const std::vector<std::string> models = tf::ModelNames();
  EXPECT_GE(models.size(), 26u) << absl::StrJoin(models, ",");
  for (const std::string& m : models) {
    EXPECT_GE(tf::CaseDirs(m).size(), 2u) << m << ": the dynamic shapes need two input sets";
    EXPECT_FALSE(tf::OpTypes(m).empty()) << m;
    EXPECT_FALSE(std::filesystem::exists(tf::FixtureDir() / m / "config.pbtxt")) << m;
  }
  absl::StatusOr<std::vector<tf::UnsupportedEntry>> list = tf::ReadUnsupportedList();
  ASSERT_TRUE(list.ok()) << list.status();
  for (const tf::UnsupportedEntry& e : *list) {
    EXPECT_TRUE(std::find(models.begin(), models.end(), e.model) != models.end())
        << tf::UnsupportedListPath() << " names '" << e.model << "', which is no fixture";
  }
}

// Runs every input set of `model`; a description of each mismatch (empty: all match).
std::vector<std::string> Mismatches(Engine& engine, const std::string& model) {
  std::vector<std::string> problems;
  for (const auto& dir : tf::CaseDirs(model)) {
    const std::string set = dir.filename().string();
    const testing::Case c = testing::ReadCase(dir);
    absl::StatusOr<std::map<std::string, tf::Tolerance>> tol = tf::OutputTolerances(dir);
    if (!tol.ok()) {
      problems.push_back(tol.status().ToString());
      continue;
    }
    absl::StatusOr<InferenceResponse> r = engine.Infer(testing::MakeRequest(c, model));
    if (!r.ok()) {
      problems.push_back(absl::StrCat(set, ": ", r.status().ToString()));
      continue;
    }
    if (r->outputs.size() != c.outputs.size()) {
      problems.push_back(
          absl::StrCat(set, ": ", r->outputs.size(), " outputs, want ", c.outputs.size()));
      continue;
    }
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      const testing::CaseTensor& want = c.outputs[i];
      if (r->outputs[i].name != want.name) {
        problems.push_back(absl::StrCat(set, ": output ", i, " is '", r->outputs[i].name,
                                        "', want '", want.name, "'"));
        continue;
      }
      const tf::Tolerance t = (*tol)[want.name];
      ::testing::AssertionResult match =
          testing::OutputMatches(r->outputs[i], want, t.atol, t.rtol);
      if (!match) problems.push_back(absl::StrCat(set, ": ", match.message()));
    }
  }
  return problems;
}

class TorchModelTest : public ::testing::TestWithParam<std::tuple<std::string, DeviceKind>> {};

TEST_P(TorchModelTest, LoadsWithoutConfigAndMatchesPyTorch) {
  const auto& [model, kind] = GetParam();
  const bool cuda = kind == DeviceKind::kCuda;
  if (cuda && CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<std::vector<tf::UnsupportedEntry>> list = tf::ReadUnsupportedList();
  ASSERT_TRUE(list.ok()) << list.status();
  const std::optional<tf::UnsupportedEntry> unsupported = tf::FindUnsupported(*list, model, cuda);

  EngineOptions options;
  options.model_repository = tf::FixtureDir().string();
  options.device = cuda ? Device::Cuda(0) : Device::Cpu();
  MemorySystem memory;  // before the engine, which allocates from it
  Engine engine(options, &memory);
  tf::Outcome outcome;
  outcome.load = engine.LoadModel(model);
  if (outcome.load.ok()) outcome.mismatches = Mismatches(engine, model);
  const std::vector<std::string> wrong = tf::Judge(model, unsupported, outcome, tf::OpTypes(model));
  EXPECT_TRUE(wrong.empty()) << absl::StrJoin(wrong, "\n");
  if (!outcome.load.ok()) {
    // Nothing half-loaded stays behind.
    EXPECT_FALSE(engine.IsModelReady(model));
    return;
  }

  // The signature comes from the export alone: the exporter's names, in its order.
  absl::StatusOr<ModelMetadata> md = engine.GetModelMetadata(model);
  ASSERT_TRUE(md.ok()) << md.status();
  const std::vector<std::filesystem::path> cases = tf::CaseDirs(model);
  ASSERT_FALSE(cases.empty());
  const testing::Case first = testing::ReadCase(cases.front());
  ASSERT_EQ(md->inputs.size(), first.inputs.size());
  for (size_t i = 0; i < first.inputs.size(); ++i) {
    EXPECT_EQ(md->inputs[i].name, first.inputs[i].name);
    EXPECT_EQ(md->inputs[i].dtype, first.inputs[i].dtype) << first.inputs[i].name;
  }
  ASSERT_EQ(md->outputs.size(), first.outputs.size());
  for (size_t i = 0; i < first.outputs.size(); ++i) {
    EXPECT_EQ(md->outputs[i].name, first.outputs[i].name);
  }
}

// A request's memory: intermediates are freed after their last reader (the liveness plan
// made at load) and kernel scratch (im2col) comes from the request's scope, so resnet18 at
// batch 1 peaks well below what its node outputs add up to, and under 16 MiB.
TEST(TorchRequestMemory, Resnet18PeakIsBoundedByLiveness) {
  const std::filesystem::path b1 = tf::FixtureDir() / "resnet18/cases/b1";
  ASSERT_TRUE(std::filesystem::exists(b1 / "case.txt")) << b1;
  EngineOptions options;
  options.model_repository = tf::FixtureDir().string();
  options.device = Device::Cpu();
  MemorySystem memory;
  Engine engine(options, &memory);
  ASSERT_TRUE(engine.LoadModel("resnet18").ok());
  absl::StatusOr<InferenceResponse> r =
      engine.Infer(testing::MakeRequest(testing::ReadCase(b1), "resnet18"));
  ASSERT_TRUE(r.ok()) << r.status();
  const uint64_t peak = r->timings.context_peak_bytes;
  const uint64_t outputs = r->timings.context_output_bytes;
  RecordProperty("context_peak_bytes", std::to_string(peak));
  RecordProperty("context_output_bytes", std::to_string(outputs));
  EXPECT_GT(peak, 0u);
  EXPECT_LT(peak, uint64_t{16} << 20) << "peak " << peak << " B, node outputs " << outputs << " B";
  EXPECT_LT(peak * 3, outputs) << "peak " << peak << " B, node outputs " << outputs << " B";
}

// Runs `def` on the CPU on the graph inputs of case `c` (engine path below the request
// layer: Graph, Model, PredictorContext); the first output's floats.
std::vector<float> RunGraphOnCpu(GraphDef def, const testing::Case& c) {
  testing::CpuGraphRun run(std::move(def), "fused");
  if (run.context() == nullptr) return {};
  PredictorContext& ctx = *run.context();
  const ModelSignature& sig = run.signature();
  const std::vector<const testing::CaseTensor*> inputs = c.GraphInputs();
  EXPECT_EQ(inputs.size(), sig.inputs.size());
  for (std::size_t i = 0; i < inputs.size() && i < sig.inputs.size(); ++i) {
    EXPECT_TRUE(ctx.SetInput(static_cast<int>(i), inputs[i]->dims, inputs[i]->bytes).ok());
  }
  const absl::Status ran = ctx.Run();
  EXPECT_TRUE(ran.ok()) << ran;
  std::vector<float> out;
  if (ran.ok()) {
    absl::StatusOr<InferOutputTensor> t = ctx.CopyOutput(0);
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) {
      out.resize(t->data.size() / sizeof(float));
      std::memcpy(out.data(), t->data.data(), out.size() * sizeof(float));
    }
  }
  EXPECT_TRUE(ctx.Close().ok());
  return out;
}

// The load-time Conv + activation fusion (engine/fusion.h) on whole exports: it fuses
// every Conv + Relu / Clip (ReLU6) / HardSwish / Sigmoid pair and every SiLU (Sigmoid and
// Mul) after a Conv these models have, and the fused graph's output equals the unfused
// graph's (same conv values, same activation functors). CPU only here; the *_cuda cases of TorchModelTest run the fused graphs (the
// loader always fuses) against PyTorch on a GPU.
TEST(TorchFusion, ConvActivationFusionMatchesTheUnfusedGraph) {
  struct Model {
    std::string name;
    int fused, removed;  // activations fused, nodes removed (a SiLU takes two)
  };
  const std::vector<Model> models = {{"resnet18", 9, 9},
                                     {"mobilenet_v2", 35, 35},
                                     {"mobilenet_v3_small", 32, 32},
                                     {"efficientnet_b0", 65, 114}};
  for (const auto& [model, want_fused, want_removed] : models) {
    SCOPED_TRACE(model);
    const std::string path = (tf::FixtureDir() / model / "1/model.onnx").string();
    absl::StatusOr<GraphDef> unfused = ReadOnnxGraphDef(path);
    ASSERT_TRUE(unfused.ok()) << unfused.status();
    ASSERT_TRUE(FuseConvBatchNorm(&*unfused).ok());
    GraphDef fused = *unfused;
    absl::StatusOr<int> n = FuseConvActivation(&fused);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, want_fused);
    EXPECT_EQ(fused.nodes.size() + want_removed, unfused->nodes.size());
    const testing::Case c = testing::ReadCase(tf::CaseDirs(model).front());
    const std::vector<float> want = RunGraphOnCpu(*std::move(unfused), c);
    const std::vector<float> got = RunGraphOnCpu(std::move(fused), c);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(got, want);
  }
}

// The rule itself, on made-up outcomes: each way a model can be at odds with the list.
TEST(TorchJudge, ListedModelMustFailNamingNodeAndOp) {
  const tf::UnsupportedEntry entry{"m", false, "no Conv"};
  const std::vector<std::string> ops = {"Conv", "Relu"};
  auto judge = [&](absl::Status load, std::vector<std::string> mismatches = {}) {
    return absl::StrJoin(tf::Judge("m", entry, {load, mismatches}, ops), "\n");
  };
  EXPECT_EQ(judge(absl::UnimplementedError("node 'c1' (Conv): unsupported operator 'Conv'")), "");
  EXPECT_EQ(judge(absl::InvalidArgumentError("node 'x' (Foo): opset 17 is not supported")), "");
  EXPECT_THAT(judge(absl::OkStatus()), ::testing::HasSubstr("remove m from"));
  EXPECT_THAT(judge(absl::OkStatus(), {"b1: logits differ"}),
              ::testing::AllOf(::testing::HasSubstr("does not match"),
                               ::testing::HasSubstr("b1: logits differ")));
  EXPECT_THAT(judge(absl::InternalError("node 'c1' (Conv): boom")),
              ::testing::HasSubstr("UNIMPLEMENTED or INVALID_ARGUMENT"));
  EXPECT_THAT(judge(absl::UnimplementedError("unsupported operator 'Conv'")),
              ::testing::HasSubstr("names no node"));
  EXPECT_THAT(judge(absl::UnimplementedError("node 'a' (Gather): bad indices")),
              ::testing::HasSubstr("neither the opset nor an operator type"));
}

TEST(TorchJudge, UnlistedModelMustLoadAndMatch) {
  const std::vector<std::string> ops = {"Conv"};
  EXPECT_TRUE(tf::Judge("m", std::nullopt, {absl::OkStatus(), {}}, ops).empty());
  EXPECT_THAT(
      absl::StrJoin(tf::Judge("m", std::nullopt, {absl::UnimplementedError("x"), {}}, ops), ""),
      ::testing::HasSubstr("list it in"));
  EXPECT_EQ(tf::Judge("m", std::nullopt, {absl::OkStatus(), {"b2: differs"}}, ops),
            std::vector<std::string>{"b2: differs"});
}

TEST(TorchJudge, CudaOnlyEntriesHoldOnCudaOnly) {
  const std::vector<tf::UnsupportedEntry> list = {{"a", true, "r"}, {"b", false, "r"}};
  EXPECT_FALSE(tf::FindUnsupported(list, "a", /*cuda=*/false).has_value());
  EXPECT_TRUE(tf::FindUnsupported(list, "a", /*cuda=*/true).has_value());
  EXPECT_TRUE(tf::FindUnsupported(list, "b", /*cuda=*/false).has_value());
  EXPECT_FALSE(tf::FindUnsupported(list, "c", /*cuda=*/true).has_value());
}

INSTANTIATE_TEST_SUITE_P(Exports, TorchModelTest,
                         ::testing::Combine(::testing::ValuesIn(tf::ModelNames()),
                                            ::testing::Values(DeviceKind::kCpu, DeviceKind::kCuda)),
                         [](const ::testing::TestParamInfo<TorchModelTest::ParamType>& info) {
                           return absl::StrCat(
                               std::get<0>(info.param),
                               std::get<1>(info.param) == DeviceKind::kCuda ? "_cuda" : "_cpu");
                         });
// Without generated fixtures there is nothing to instantiate; ArePresent... reports it.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TorchModelTest);

}  // namespace
}  // namespace ndserve::engine
