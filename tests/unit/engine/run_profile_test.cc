// The per-node run profile (engine/run_profile.h): nothing is recorded unless a profile is
// active; when one is, every node of every run is, with its shapes and FLOP count.
#include "engine/run_profile.h"

#include <string>
#include <vector>

#include "engine/graph.h"
#include "gtest/gtest.h"
#include "tests/unit/engine/cpu_graph_run.h"
#include "tests/unit/engine/engine_test_util.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::engine {
namespace {

using kernels::testing::RandomFloats;
using ::ndserve::engine::testing::CpuGraphRun;
using ::ndserve::engine::testing::Fp32Init;

// x [1,2,5,5] -> Conv(w [3,2,3,3], pads 1) -> c -> Relu -> y.
GraphDef ConvRelu() {
  GraphDef def;
  def.name = "conv_relu";
  def.opset = 17;
  def.inputs.push_back({"x", DType::kFp32, {1, 2, 5, 5}});
  def.outputs.push_back({"y", DType::kFp32, {1, 3, 5, 5}});
  def.initializers.push_back(Fp32Init("w", {3, 2, 3, 3}, RandomFloats(54, 1, -1, 1)));
  def.nodes.push_back(
      {"conv", "Conv", "", {"x", "w"}, {"c"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}}});
  def.nodes.push_back({"relu", "Relu", "", {"c"}, {"y"}, {}});
  return def;
}

// Runs the graph `runs` times through one context.
void RunTimes(CpuGraphRun& run, int runs) {
  ASSERT_NE(run.context(), nullptr);
  const std::vector<float> x = RandomFloats(50, 7);
  for (int i = 0; i < runs; ++i) {
    ASSERT_TRUE(run.context()
                    ->SetInput(0, {1, 2, 5, 5},
                               absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(x.data()),
                                                   x.size() * sizeof(float)))
                    .ok());
    absl::Status s = run.context()->Run();
    ASSERT_TRUE(s.ok()) << s;
  }
}

TEST(RunProfileTest, NothingRecordedWhenNoProfileIsActive) {
  RunProfile profile;
  ASSERT_EQ(ActiveRunProfile(), nullptr);
  CpuGraphRun run(ConvRelu(), "conv_relu");
  RunTimes(run, 2);
  EXPECT_EQ(profile.runs(), 0);
  EXPECT_TRUE(profile.Nodes().empty());
}

TEST(RunProfileTest, RecordsEveryNodeOfEveryRunWithShapesAndFlops) {
  RunProfile profile;
  CpuGraphRun run(ConvRelu(), "conv_relu");
  SetActiveRunProfile(&profile);
  RunTimes(run, 3);
  SetActiveRunProfile(nullptr);
  RunTimes(run, 1);  // after it is switched off: not counted
  EXPECT_EQ(profile.runs(), 3);
  const std::vector<RunProfile::NodeStat> nodes = profile.Nodes();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "conv");
  EXPECT_EQ(nodes[0].op, "Conv");
  EXPECT_EQ(nodes[0].shapes, "1x2x5x5 3x2x3x3 -> 1x3x5x5");
  EXPECT_EQ(nodes[0].calls, 3);
  EXPECT_DOUBLE_EQ(nodes[0].flops, 2.0 * 75 * 18);  // 75 outputs, 2 x 3 x 3 taps each
  EXPECT_GE(nodes[0].seconds, 0.0);
  EXPECT_EQ(nodes[1].name, "relu");
  EXPECT_EQ(nodes[1].shapes, "1x3x5x5 -> 1x3x5x5");
  EXPECT_EQ(nodes[1].calls, 3);
  EXPECT_EQ(nodes[1].flops, 0.0);
  const std::string report = profile.Report(10);
  EXPECT_NE(report.find("3 runs"), std::string::npos) << report;
  EXPECT_NE(report.find("| Conv | 1 |"), std::string::npos) << report;
  EXPECT_NE(report.find("| relu | Relu | 1x3x5x5 -> 1x3x5x5 |"), std::string::npos) << report;
}

TEST(RunProfileTest, FlopsOfTheProductOps) {
  using kernels::OpKind;
  using kernels::ShapeSpan;
  const std::vector<int64_t> a = {4, 6}, b = {6, 5}, y = {4, 5};
  const ShapeSpan gemm_in[] = {a, b}, gemm_out[] = {y};
  EXPECT_DOUBLE_EQ(NodeFlops(OpKind::kGemm, gemm_in, gemm_out), 2.0 * 4 * 5 * 6);
  const std::vector<int64_t> ba = {3, 4, 6}, bb = {6, 5}, by = {3, 4, 5};
  const ShapeSpan mm_in[] = {ba, bb}, mm_out[] = {by};
  EXPECT_DOUBLE_EQ(NodeFlops(OpKind::kMatMul, mm_in, mm_out), 2.0 * 3 * 4 * 5 * 6);
  // Depthwise: 8 groups of one channel, 3x3 taps.
  const std::vector<int64_t> x = {1, 8, 10, 10}, w = {8, 1, 3, 3}, cy = {1, 8, 10, 10};
  const ShapeSpan conv_in[] = {x, w}, conv_out[] = {cy};
  EXPECT_DOUBLE_EQ(NodeFlops(OpKind::kConv, conv_in, conv_out), 2.0 * 800 * 9);
  EXPECT_EQ(NodeFlops(OpKind::kRelu, conv_in, conv_out), 0.0);
}

}  // namespace
}  // namespace ndserve::engine
