// Recurrent nodes as exporters write them: LSTM(X, W, R, B, "", initial_h, initial_c) with
// sequence_lens left out before present inputs, and outputs left out before used ones.
// The graph drops the absent inputs and the rules learn from kPresentInputsAttr which
// inputs the kernel gets (kernels/optional_inputs.h).

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/model.h"
#include "engine/predictor_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dispatch.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "tests/unit/engine/cpu_graph_run.h"

namespace ndserve::engine {
namespace {

constexpr int64_t kSeq = 3, kBatch = 2, kInput = 3, kHidden = 4;

std::string FloatBytes(int64_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>((i * 37 + 11) % 17) / 17 + shift;
  return std::string(reinterpret_cast<const char*>(v.data()), n * sizeof(float));
}

// x, h0, c0 graph inputs; W, R, B (and, with `lens`, a full-length sequence_lens)
// initializers; outputs Y_h and Y_c with Y left out.
GraphDef LstmGraph(bool lens) {
  GraphDef def;
  def.name = "lstm";
  def.opset = 14;
  def.inputs.push_back({"x", DType::kFp32, {kSeq, kBatch, kInput}});
  def.inputs.push_back({"h0", DType::kFp32, {1, kBatch, kHidden}});
  def.inputs.push_back({"c0", DType::kFp32, {1, kBatch, kHidden}});
  def.outputs.push_back({"y_h", DType::kFp32, {1, kBatch, kHidden}});
  def.outputs.push_back({"y_c", DType::kFp32, {1, kBatch, kHidden}});
  def.initializers.push_back(
      {"W", DType::kFp32, {1, 4 * kHidden, kInput}, FloatBytes(4 * kHidden * kInput, 1, -0.5f)});
  def.initializers.push_back({"R",
                              DType::kFp32,
                              {1, 4 * kHidden, kHidden},
                              FloatBytes(4 * kHidden * kHidden, 0.8f, -0.4f)});
  def.initializers.push_back(
      {"B", DType::kFp32, {1, 8 * kHidden}, FloatBytes(8 * kHidden, 0.5f, -0.25f)});
  std::string lens_name;
  if (lens) {
    const int32_t v[kBatch] = {kSeq, kSeq};
    def.initializers.push_back({"lens",
                                DType::kInt32,
                                {kBatch},
                                std::string(reinterpret_cast<const char*>(v), sizeof(v))});
    lens_name = "lens";
  }
  kernels::AttrMap attrs = {{"hidden_size", kHidden}};
  def.nodes.push_back(
      {"lstm", "LSTM", "", {"x", "W", "R", "B", lens_name, "h0", "c0"}, {"", "y_h", "y_c"}, attrs});
  return def;
}

// Runs the graph on the CPU and returns its outputs as floats.
std::vector<std::vector<float>> RunOnCpu(GraphDef def) {
  testing::CpuGraphRun run(std::move(def), "lstm");
  if (run.context() == nullptr) return {};
  PredictorContext& ctx = *run.context();
  const std::string x = FloatBytes(kSeq * kBatch * kInput, 2, -1);
  const std::string h0 = FloatBytes(kBatch * kHidden, 1.5f, -0.7f);
  const std::string c0 = FloatBytes(kBatch * kHidden, -1.2f, 0.6f);
  auto bytes = [](const std::string& s) {
    return absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  EXPECT_TRUE(ctx.SetInput(0, {kSeq, kBatch, kInput}, bytes(x)).ok());
  EXPECT_TRUE(ctx.SetInput(1, {1, kBatch, kHidden}, bytes(h0)).ok());
  EXPECT_TRUE(ctx.SetInput(2, {1, kBatch, kHidden}, bytes(c0)).ok());
  const absl::Status ran = ctx.Run();
  EXPECT_TRUE(ran.ok()) << ran;
  std::vector<std::vector<float>> outs;
  for (int o = 0; o < 2 && ran.ok(); ++o) {
    absl::StatusOr<InferOutputTensor> t = ctx.CopyOutput(o);
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) break;
    std::vector<float> v(t->data.size() / sizeof(float));
    std::memcpy(v.data(), t->data.data(), t->data.size());
    outs.push_back(std::move(v));
  }
  EXPECT_TRUE(ctx.Close().ok());
  return outs;
}

TEST(RecurrentGraph, AbsentSequenceLensBetweenPresentInputs) {
  const std::vector<std::vector<float>> got = RunOnCpu(LstmGraph(/*lens=*/false));
  const std::vector<std::vector<float>> want = RunOnCpu(LstmGraph(/*lens=*/true));
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  for (int o = 0; o < 2; ++o) {
    ASSERT_EQ(got[o].size(), static_cast<std::size_t>(kBatch * kHidden));
    EXPECT_EQ(got[o], want[o]) << "output " << o;
  }
  // The states were read: Y_c is not what zero initial states would give.
  bool nonzero = false;
  for (float v : got[1]) nonzero |= v != 0.0f;
  EXPECT_TRUE(nonzero);
}

TEST(RecurrentGraph, OtherOpsStillRefuseAbsentInputsBeforePresentOnes) {
  GraphDef def;
  def.name = "gemm";
  def.opset = 14;
  def.inputs.push_back({"a", DType::kFp32, {2, 2}});
  def.inputs.push_back({"c", DType::kFp32, {2, 2}});
  def.outputs.push_back({"y", DType::kFp32, {2, 2}});
  def.nodes.push_back({"gemm", "Gemm", "", {"a", "", "c"}, {"y"}, {}});
  absl::StatusOr<Graph> graph = Graph::Build(std::move(def));
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kUnimplemented) << graph.status();
  EXPECT_THAT(std::string(graph.status().message()), ::testing::HasSubstr("absent optional"));
}

}  // namespace
}  // namespace ndserve::engine
