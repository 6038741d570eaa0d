// RecordedGraph: the example models (tools/gen_models.py) fine-tuned through the autograd
// ops, and the pool's bytes flat across thousands of steps.

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/onnx_loader.h"
#include "gtest/gtest.h"
#include "tests/unit/train/train_test_util.h"
#include "train/losses.h"
#include "train/optimizer.h"
#include "train/recorded_graph.h"

namespace ndserve::train {
namespace {

using testing_util::Must;
using testing_util::TrainTest;

engine::Graph LoadExample(const std::string& name) {
  const char* root = std::getenv("NDSERVE_SOURCE_DIR");
  const std::string path =
      std::string(root != nullptr ? root : ".") + "/examples/models/" + name + "/1/model.onnx";
  // Unfused: the autograd replays the file's ops one by one.
  return Must(engine::Graph::Build(Must(engine::ReadOnnxGraphDef(path))));
}

class RecordedGraphTest : public TrainTest {
 protected:
  // One step of the MLP on a fixed batch: forward to the logits, cross-entropy, backward,
  // update, clear; the step's batch manager is closed at the end. Returns the loss.
  float MlpStep(const RecordedGraph& g, Optimizer& optimizer, const std::vector<float>& x,
                const std::vector<std::int64_t>& labels) {
    auto batch = Must(trainer_->NewSubManager(ManagerLevel::kBatch, "step"));
    const std::int64_t n = static_cast<std::int64_t>(labels.size());
    NDArray input = Must(batch->FromHostValues<float>({n, 64}, x));
    Variable y = Variable::Constant(Must(batch->FromHostValues<std::int64_t>({n}, labels)));
    std::vector<Variable> out = Must(g.Forward(*batch, {input}, {"fc2"}));
    Variable loss = Must(CrossEntropyLoss(*batch, out[0], y));
    EXPECT_TRUE(Backward(loss, *batch).ok());
    EXPECT_TRUE(optimizer.Step().ok());
    EXPECT_TRUE(ClearGrad(optimizer.parameters()).ok());
    const float value = Must(loss.value().ToVector<float>())[0];
    EXPECT_TRUE(batch->Close().ok());
    return value;
  }
};

TEST_F(RecordedGraphTest, FineTunesTheMlpsLastLayer) {
  engine::Graph graph = LoadExample("mlp");
  const std::vector<std::string> trainable{"fc2.weight", "fc2.bias"};
  absl::StatusOr<RecordedGraph> made = RecordedGraph::Create(graph, trainable, *trainer_);
  ASSERT_TRUE(made.ok()) << made.status();
  const RecordedGraph& g = *made;
  ASSERT_EQ(g.parameters().size(), 2u);
  auto optimizer = Must(Sgd::Create(g.parameters(), SgdOptions{0.1f, 0.9f}, *trainer_));
  const std::vector<float> x = Random(16 * 64);
  std::vector<std::int64_t> labels(16);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 10);
  const float first = MlpStep(g, *optimizer, x, labels);
  float last = first;
  for (int i = 0; i < 50; ++i) last = MlpStep(g, *optimizer, x, labels);
  EXPECT_LT(last, 0.5f * first);
  // The graph output is still there: probabilities from the fine-tuned weights.
  auto batch = Must(trainer_->NewSubManager(ManagerLevel::kBatch));
  NDArray input = Must(batch->FromHostValues<float>({16, 64}, x));
  std::vector<float> p = Must(Must(g.Forward(*batch, {input}))[0].value().ToVector<float>());
  float row = 0;
  for (int j = 0; j < 10; ++j) row += p[j];
  EXPECT_NEAR(row, 1.0f, 1e-5);
}

TEST_F(RecordedGraphTest, RefusesUnknownTrainableNames) {
  engine::Graph graph = LoadExample("mlp");
  const std::vector<std::string> trainable{"fc9.weight"};
  EXPECT_TRUE(absl::IsInvalidArgument(RecordedGraph::Create(graph, trainable, *trainer_).status()));
}

TEST_F(RecordedGraphTest, AnOpWithoutBackwardIsUnimplementedNamingTheNode) {
  engine::GraphDef def;
  def.name = "exp";
  def.opset = 17;
  def.inputs.push_back({"x", DType::kFp32, {2}});
  def.outputs.push_back({"y", DType::kFp32, {2}});
  engine::NodeDef node;
  node.name = "the_exp";
  node.op_type = "Exp";
  node.inputs = {"x"};
  node.outputs = {"y"};
  def.nodes.push_back(node);
  engine::Graph graph = Must(engine::Graph::Build(def));
  const absl::Status status = RecordedGraph::Create(graph, {}, *trainer_).status();
  EXPECT_TRUE(absl::IsUnimplemented(status)) << status;
  EXPECT_NE(status.message().find("the_exp"), absl::string_view::npos) << status;
}

TEST_F(RecordedGraphTest, PoolBytesAreFlatAcrossThousandsOfSteps) {
  engine::Graph graph = LoadExample("mlp");
  absl::StatusOr<RecordedGraph> made = RecordedGraph::Create(graph, {}, *trainer_);
  ASSERT_TRUE(made.ok()) << made.status();
  const RecordedGraph& g = *made;
  ASSERT_EQ(g.parameters().size(), 6u);
  auto optimizer = Must(Adam::Create(g.parameters(), AdamOptions{}, *trainer_));
  const std::vector<float> x = Random(8 * 64);
  const std::vector<std::int64_t> labels{0, 1, 2, 3, 4, 5, 6, 7};
  std::uint64_t after_10 = 0;
  const std::uint64_t trainer_bytes = trainer_->bytes();
  for (int step = 1; step <= 3000; ++step) {
    MlpStep(g, *optimizer, x, labels);
    if (step == 10) after_10 = AllocatedBytes();
  }
  EXPECT_EQ(AllocatedBytes(), after_10);
  EXPECT_EQ(trainer_->bytes(), trainer_bytes);
}

TEST_F(RecordedGraphTest, RecsysEmbeddingsGetRowGradients) {
  engine::Graph graph = LoadExample("recsys");
  const std::vector<std::string> trainable{"emb0.table", "fc0.weight", "fc0.bias", "fc2.weight"};
  absl::StatusOr<RecordedGraph> made = RecordedGraph::Create(graph, trainable, *trainer_);
  ASSERT_TRUE(made.ok()) << made.status();
  const RecordedGraph& g = *made;
  auto optimizer = Must(Sgd::Create(g.parameters(), SgdOptions{0.5f}, *trainer_));
  const std::vector<float> table_before = Must(g.parameters()[0].value().ToVector<float>());
  std::vector<std::int64_t> ids(4 * 4 * 8);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i * 7 % 50);
  std::uint64_t after_10 = 0;
  for (int step = 1; step <= 30; ++step) {
    auto batch = Must(trainer_->NewSubManager(ManagerLevel::kBatch));
    NDArray sparse = Must(batch->FromHostValues<std::int64_t>({4, 4, 8}, ids));
    NDArray dense = Must(batch->FromHostValues<float>({4, 13}, std::vector<float>(52, 0.5f)));
    Variable logits = Must(g.Forward(*batch, {sparse, dense}, {"fc2"}))[0];
    Variable target = Variable::Constant(Must(batch->FromHostValues<float>({4, 1}, {1, 0, 1, 0})));
    Variable loss = Must(BceWithLogitsLoss(*batch, logits, target));
    ASSERT_TRUE(Backward(loss, *batch).ok());
    ASSERT_TRUE(optimizer->Step().ok());
    ASSERT_TRUE(ClearGrad(optimizer->parameters()).ok());
    ASSERT_TRUE(batch->Close().ok());
    if (step == 10) after_10 = AllocatedBytes();
  }
  EXPECT_EQ(AllocatedBytes(), after_10);
  // Only the rows of feature 0's ids moved (feature 0 is ids[:, 0, :]).
  const std::vector<float> table = Must(g.parameters()[0].value().ToVector<float>());
  std::vector<bool> used(100000, false);
  for (int b = 0; b < 4; ++b) {
    for (int k = 0; k < 8; ++k) used[ids[b * 32 + k]] = true;
  }
  int moved = 0, moved_unused = 0;
  for (int r = 0; r < 100000; ++r) {
    bool changed = false;
    for (int j = 0; j < 32; ++j) changed = changed || table[r * 32 + j] != table_before[r * 32 + j];
    moved += changed ? 1 : 0;
    moved_unused += changed && !used[r] ? 1 : 0;
  }
  EXPECT_GT(moved, 0);
  EXPECT_EQ(moved_unused, 0);
  // The table's gradient is all zeros again after ClearGrad touched only those rows.
  const std::vector<float> grad = Must(g.parameters()[0].grad().ToVector<float>());
  EXPECT_EQ(std::count(grad.begin(), grad.end(), 0.0f), static_cast<long>(grad.size()));
}

}  // namespace
}  // namespace ndserve::train
