// Loop as the loader inlines it (engine/subgraph_inliner.h) and the engine runs it, body
// once per iteration (PredictorContext::RunLoop). The fixtures (tests/fixtures/graphs/
// loop_*, tools/gen_models.py, references checked against onnxruntime) are the patterns
// exporters write:
//   loop_scan            a for-loop over x's rows: trip count from Shape -> Gather, cond a
//                        constant true, a running sum, two scan outputs (a row, the
//                        iteration number), outer initializer and graph input reads;
//   loop_while           no trip count and a cond computed in the body (0, 1 and 5
//                        iterations), and torch's `while`: M = INT64 max;
//   loop_growing         a carried [0, 4] that grows by Concat (Mask R-CNN's paste), M
//                        from an input's value (0, 1, 4), an If and a nested Loop in the
//                        body, a scalar scan output that is [0] after no iteration;
//   loop_sequence        torch's lists: SequenceEmpty / SequenceInsert / ConcatFromSequence
//                        stacked (axis 1) and concatenated (axis 0);
//   loop_sequence_reread one list read by two ConcatFromSequence (torch.stack(outs, -1)
//                        and torch.stack(outs));
//   loop_ragged_scan     a scan output whose shape changes when the input `grow` says so:
//                        a run-time error, and the next request still works.
//   loop_tensor_split    torch.tensor_split as MViT exports it: a constant-trip Loop
//                        appending to a list read by SequenceAt / SequenceLength /
//                        ConcatFromSequence (unrolled at load, the list known there).
// CPU always; CUDA when a device is present.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/graph.h"
#include "engine/onnx_loader.h"
#include "engine/served_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/cuda_runtime.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using ::testing::HasSubstr;
using testing::SourceDir;

std::filesystem::path GraphDir(const std::string& name) {
  return SourceDir() / "tests/fixtures/graphs" / name;
}

std::string BadModel(const std::string& file) {
  return (SourceDir() / "tests/fixtures/bad" / file).string();
}

MemorySystem* TestMemory() {
  static MemorySystem* memory = new MemorySystem();
  return memory;
}

Device DeviceOf(DeviceKind kind) {
  return kind == DeviceKind::kCuda ? Device::Cuda(0) : Device::Cpu();
}

absl::StatusOr<std::shared_ptr<ServedModel>> LoadModel(const std::string& name,
                                                       const std::string& model_path,
                                                       DeviceKind kind) {
  ModelLoadSpec spec;
  spec.name = name;
  spec.model_path = model_path;
  spec.device = DeviceOf(kind);
  return ServedModel::Load(spec, TestMemory());
}

// Index of the node `name` in `g`, or -1.
int FindNode(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.nodes()[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Graph LoadGraph(const std::string& name) {
  absl::StatusOr<Graph> g = LoadOnnxGraph((GraphDir(name) / "model.onnx").string());
  EXPECT_TRUE(g.ok()) << name << ": " << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

// The response's outputs match the case's, by name.
void ExpectCaseOutputs(const InferenceResponse& r, const testing::Case& c) {
  ASSERT_EQ(r.outputs.size(), c.outputs.size()) << c.name;
  for (const testing::CaseTensor& want : c.outputs) {
    auto got = std::find_if(r.outputs.begin(), r.outputs.end(),
                            [&](const InferOutputTensor& o) { return o.name == want.name; });
    ASSERT_NE(got, r.outputs.end()) << c.name << ": no output '" << want.name << "'";
    EXPECT_TRUE(testing::OutputMatches(*got, want, c.atol, c.rtol)) << c.name;
  }
}

struct LoopFixture {
  const char* name;
  int cases;
};

class LoopFixtureTest : public ::testing::TestWithParam<std::tuple<LoopFixture, DeviceKind>> {};

TEST_P(LoopFixtureTest, EveryCaseMatchesTheReferenceRequestAfterRequest) {
  const auto& [fx, kind] = GetParam();
  if (kind == DeviceKind::kCuda && CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<std::shared_ptr<ServedModel>> model =
      LoadModel(fx.name, (GraphDir(fx.name) / "model.onnx").string(), kind);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<int64_t> held_before;
  for (const auto& p : (*model)->predictors().predictors()) {
    held_before.push_back(p->manager()->resource_count());
  }
  const std::vector<std::string> names = testing::CaseNames(GraphDir(fx.name));
  EXPECT_EQ(static_cast<int>(names.size()), fx.cases);
  // Twice over, so a run of one trip count cannot reuse what a run of another left.
  for (int round = 0; round < 2; ++round) {
    for (const std::string& name : names) {
      const testing::Case c = testing::ReadCase(GraphDir(fx.name) / name);
      absl::StatusOr<InferenceResponse> r = (*model)->Infer(testing::MakeRequest(c, fx.name));
      ASSERT_TRUE(r.ok()) << name << " (round " << round << "): " << r.status();
      ExpectCaseOutputs(*r, c);
    }
  }
  // What the iterations made lived in the requests' scopes and went with them.
  const auto& predictors = (*model)->predictors().predictors();
  for (size_t i = 0; i < predictors.size(); ++i) {
    EXPECT_EQ(predictors[i]->manager()->resource_count(), held_before[i]);
    EXPECT_EQ(predictors[i]->manager()->child_count(), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, LoopFixtureTest,
    ::testing::Combine(::testing::Values(LoopFixture{"loop_scan", 3}, LoopFixture{"loop_while", 3},
                                         LoopFixture{"loop_growing", 3},
                                         LoopFixture{"loop_sequence", 3},
                                         LoopFixture{"loop_sequence_reread", 2},
                                         LoopFixture{"loop_ragged_scan", 3},
                                         LoopFixture{"loop_tensor_split", 2}),
                       ::testing::Values(DeviceKind::kCpu, DeviceKind::kCuda)),
    [](const ::testing::TestParamInfo<LoopFixtureTest::ParamType>& info) {
      return absl::StrCat(std::get<0>(info.param).name,
                          std::get<1>(info.param) == DeviceKind::kCuda ? "_cuda" : "_cpu");
    });

class LoopDeviceTest : public ::testing::TestWithParam<DeviceKind> {
 protected:
  void SetUp() override {
    if (GetParam() == DeviceKind::kCuda && CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// A scan output whose shape changes between iterations cannot be stacked: the request
// fails naming the Loop, and the model serves the next request as before.
TEST_P(LoopDeviceTest, ARaggedScanOutputFailsTheRequestOnly) {
  absl::StatusOr<std::shared_ptr<ServedModel>> model = LoadModel(
      "loop_ragged_scan", (GraphDir("loop_ragged_scan") / "model.onnx").string(), GetParam());
  ASSERT_TRUE(model.ok()) << model.status();
  const testing::Case steady = testing::ReadCase(GraphDir("loop_ragged_scan") / "steady_n3");
  // The same three iterations, each growing the carried value by x's rows.
  testing::Case ragged = steady;
  for (testing::CaseTensor& t : ragged.inputs) {
    if (t.name == "grow") {
      ASSERT_EQ(t.bytes.size(), 1u);
      t.bytes[0] = 1;
    }
  }
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<InferenceResponse> bad =
        (*model)->Infer(testing::MakeRequest(ragged, "loop_ragged_scan"));
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
    EXPECT_THAT(bad.status().message(), HasSubstr("node 'ragged' (Loop)")) << bad.status();
    EXPECT_THAT(bad.status().message(), HasSubstr("'scans'")) << bad.status();
    absl::StatusOr<InferenceResponse> good =
        (*model)->Infer(testing::MakeRequest(steady, "loop_ragged_scan"));
    ASSERT_TRUE(good.ok()) << good.status();
    ExpectCaseOutputs(*good, steady);
  }
}

// tests/fixtures/bad/loop.onnx, refused before Loop was served: three Negs of x.
TEST_P(LoopDeviceTest, TheSmallestLoopRuns) {
  absl::StatusOr<std::shared_ptr<ServedModel>> model =
      LoadModel("loop", BadModel("loop.onnx"), GetParam());
  ASSERT_TRUE(model.ok()) << model.status();
  const float x[2] = {1.5f, -2.0f};
  InferenceRequest request;
  request.model_name = "loop";
  const auto* bytes = reinterpret_cast<const uint8_t*>(x);
  request.inputs.push_back({"x", DType::kFp32, {2}, absl::MakeConstSpan(bytes, sizeof(x))});
  absl::StatusOr<InferenceResponse> r = (*model)->Infer(request);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->outputs.size(), 1u);
  ASSERT_EQ(r->outputs[0].data.size(), sizeof(x));
  float y[2];
  std::memcpy(y, r->outputs[0].data.data(), sizeof(y));
  EXPECT_EQ(y[0], -1.5f);
  EXPECT_EQ(y[1], 2.0f);
}

INSTANTIATE_TEST_SUITE_P(Devices, LoopDeviceTest,
                         ::testing::Values(DeviceKind::kCpu, DeviceKind::kCuda),
                         [](const ::testing::TestParamInfo<DeviceKind>& info) {
                           return std::string(info.param == DeviceKind::kCuda ? "cuda" : "cpu");
                         });

TEST(LoopInliningTest, TheBodyJoinsTheGraphUnderItsLoop) {
  const Graph g = LoadGraph("loop_scan");
  const int loop = FindNode(g, "scan_loop");
  ASSERT_GE(loop, 0);
  const Node& node = g.nodes()[loop];
  EXPECT_EQ(node.op, kernels::OpKind::kLoop);
  EXPECT_EQ(node.loop, kNoValue);
  ASSERT_NE(node.body, nullptr);
  EXPECT_EQ(node.body->carried.size(), 1u);
  EXPECT_EQ(node.body->scans.size(), 2u);
  // A body node is the Loop's, renamed under it, and reads the outer x and w.
  const int accumulate = FindNode(g, "scan_loop/body/accumulate");
  ASSERT_GE(accumulate, 0);
  EXPECT_EQ(g.nodes()[accumulate].loop, loop);
  EXPECT_NE(std::find(node.body->nodes.begin(), node.body->nodes.end(), accumulate),
            node.body->nodes.end());
  const int row = FindNode(g, "scan_loop/body/row");
  ASSERT_GE(row, 0);
  EXPECT_EQ(g.values()[g.nodes()[row].inputs[0]].name, "x");
  const int scale = FindNode(g, "scan_loop/body/scale");
  ASSERT_GE(scale, 0);
  EXPECT_EQ(g.values()[g.nodes()[scale].inputs[1]].name, "w");
  // The iteration number and carried value are set by the Loop.
  EXPECT_EQ(g.values()[node.body->iter].source, ValueSource::kLoop);
  EXPECT_EQ(g.values()[node.body->carried[0]].source, ValueSource::kLoop);
}

TEST(LoopInliningTest, NestedLoopsAndIfsBelongToTheInnermostLoop) {
  const Graph g = LoadGraph("loop_growing");
  const int grow = FindNode(g, "grow");
  const int refine = FindNode(g, "grow/body/refine");
  const int pick = FindNode(g, "grow/body/pick");
  ASSERT_GE(grow, 0);
  ASSERT_GE(refine, 0);
  ASSERT_GE(pick, 0);
  EXPECT_EQ(g.nodes()[grow].op, kernels::OpKind::kLoop);
  EXPECT_EQ(g.nodes()[refine].op, kernels::OpKind::kLoop);
  EXPECT_EQ(g.nodes()[pick].op, kernels::OpKind::kIf);
  EXPECT_EQ(g.nodes()[refine].loop, grow);
  EXPECT_EQ(g.nodes()[pick].loop, grow);
  ASSERT_NE(g.nodes()[grow].body, nullptr);
  EXPECT_EQ(g.nodes()[grow].body->scans.size(), 1u);
  ASSERT_NE(g.nodes()[refine].body, nullptr);
  EXPECT_EQ(g.nodes()[refine].body->scans.size(), 1u);
  // The If's branch node is the outer loop's and guarded; the inner body's is the inner's.
  const int minus_k = FindNode(g, "grow/body/pick/then/minus_k");
  ASSERT_GE(minus_k, 0);
  EXPECT_EQ(g.nodes()[minus_k].loop, grow);
  EXPECT_EQ(g.nodes()[minus_k].guards.size(), 1u);
  const int add_k = FindNode(g, "grow/body/refine/body/add_k");
  ASSERT_GE(add_k, 0);
  EXPECT_EQ(g.nodes()[add_k].loop, refine);
}

TEST(LoopInliningTest, TorchListsBecomeScanOutputs) {
  const Graph g = LoadGraph("loop_sequence");
  const int loop = FindNode(g, "/Loop");
  ASSERT_GE(loop, 0);
  const Node& node = g.nodes()[loop];
  EXPECT_EQ(node.op, kernels::OpKind::kLoop);
  ASSERT_NE(node.body, nullptr);
  EXPECT_EQ(node.body->carried.size(), 1u);  // h; the lists are scan outputs now
  ASSERT_EQ(node.body->scans.size(), 2u);
  // torch.stack(outs, 1) and torch.cat(rows, 0), in either order.
  bool stacked = false, concatenated = false;
  for (const ScanOutput& s : node.body->scans) {
    stacked |= s.axis == 1 && s.new_axis;
    concatenated |= s.axis == 0 && !s.new_axis;
  }
  EXPECT_TRUE(stacked);
  EXPECT_TRUE(concatenated);
}

TEST(LoopInliningTest, ABodyWithTheWrongOutputCountIsInvalidNamingTheNode) {
  absl::StatusOr<Graph> g = LoadOnnxGraph(BadModel("loop_output_count.onnx"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument) << g.status();
  EXPECT_THAT(g.status().message(), HasSubstr("node 'short_body' (Loop)"));
  EXPECT_THAT(g.status().message(), HasSubstr("2 outputs"));
}

// A list read after the loop by anything but ConcatFromSequence is no scan output, and
// with a trip count from the data its length is unknown at load: refused, naming the Loop.
TEST(LoopInliningTest, AListReadBySequenceAtIsUnimplemented) {
  absl::StatusOr<Graph> g = LoadOnnxGraph(BadModel("loop_sequence_at.onnx"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented) << g.status();
  EXPECT_THAT(g.status().message(), HasSubstr("node 'collect' (Loop)"));
  EXPECT_THAT(g.status().message(), HasSubstr("carries a sequence"));
}

}  // namespace
}  // namespace ndserve::engine
