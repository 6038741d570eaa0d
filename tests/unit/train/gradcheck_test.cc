// Every op's backward against central finite differences (docs/design.md §10).

#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/train/train_test_util.h"
#include "train/elementwise_ops.h"
#include "train/linear_ops.h"
#include "train/losses.h"
#include "train/lstm_cell.h"
#include "train/reduce_ops.h"
#include "train/shape_ops.h"

namespace ndserve::train {
namespace {

using testing_util::TrainTest;
using V = absl::Span<const Variable>;

class GradCheckTest : public TrainTest {};

TEST_F(GradCheckTest, AddBroadcastsAndSumsBack) {
  GradCheck([](NDManager& s, V p) { return Add(s, p[0], p[1]); },
            {RandomParam({3, 4}), RandomParam({4})});
}

TEST_F(GradCheckTest, SubBroadcastsBothWays) {
  GradCheck([](NDManager& s, V p) { return Sub(s, p[0], p[1]); },
            {RandomParam({3, 1}), RandomParam({1, 4})});
}

TEST_F(GradCheckTest, MulBroadcastsAMiddleDim) {
  GradCheck([](NDManager& s, V p) { return Mul(s, p[0], p[1]); },
            {RandomParam({2, 3, 4}), RandomParam({3, 1})});
}

TEST_F(GradCheckTest, Div) {
  GradCheck([](NDManager& s, V p) { return Div(s, p[0], p[1]); },
            {RandomParam({2, 3}), RandomParam({2, 3}, 1.0f, 2.0f)});
}

TEST_F(GradCheckTest, SameInputTwice) {
  // x * x: both contributions reach the one parameter.
  GradCheck([](NDManager& s, V p) { return Mul(s, p[0], p[0]); }, {RandomParam({5})});
}

TEST_F(GradCheckTest, Relu) {
  std::vector<float> v = Random(12, 0.2f, 1.0f);
  for (std::size_t i = 0; i < v.size(); i += 2) v[i] = -v[i];  // away from the kink
  GradCheck([](NDManager& s, V p) { return Relu(s, p[0]); }, {Param({3, 4}, v)});
}

TEST_F(GradCheckTest, SigmoidAndTanh) {
  GradCheck([](NDManager& s, V p) -> absl::StatusOr<Variable> {
    auto a = Sigmoid(s, p[0]);
    if (!a.ok()) return a;
    return Tanh(s, *a);
  }, {RandomParam({3, 4}, -2.0f, 2.0f)});
}

TEST_F(GradCheckTest, GemmEveryTransposeWithBias) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      GemmOptions o;
      o.trans_a = ta;
      o.trans_b = tb;
      o.alpha = 0.7f;
      o.beta = 1.3f;
      std::vector<std::int64_t> a_shape = ta ? std::vector<std::int64_t>{4, 3} : std::vector<std::int64_t>{3, 4};
      std::vector<std::int64_t> b_shape = tb ? std::vector<std::int64_t>{5, 4} : std::vector<std::int64_t>{4, 5};
      GradCheck([o](NDManager& s, V p) { return Gemm(s, p[0], p[1], p[2], o); },
                {RandomParam(a_shape), RandomParam(b_shape), RandomParam({5})});
    }
  }
}

TEST_F(GradCheckTest, GemmWithColumnBias) {
  GradCheck([](NDManager& s, V p) { return Gemm(s, p[0], p[1], p[2]); },
            {RandomParam({3, 4}), RandomParam({4, 2}), RandomParam({3, 1})});
}

TEST_F(GradCheckTest, MatMulFlattensLeadingDims) {
  GradCheck([](NDManager& s, V p) { return MatMul(s, p[0], p[1]); },
            {RandomParam({2, 3, 4}), RandomParam({4, 5})});
}

TEST_F(GradCheckTest, SoftmaxOnAMiddleAxis) {
  GradCheck([](NDManager& s, V p) { return Softmax(s, p[0], 1); }, {RandomParam({2, 3, 4})});
}

TEST_F(GradCheckTest, LogSoftmax) {
  GradCheck([](NDManager& s, V p) { return LogSoftmax(s, p[0], -1); }, {RandomParam({3, 5})});
}

TEST_F(GradCheckTest, GatherRowsWithRepeatedIds) {
  Variable ids = Ids({2, 3}, {4, 0, 4, 2, 2, 9});
  GradCheck([ids](NDManager& s, V p) { return Gather(s, p[0], ids, 0); }, {RandomParam({10, 3})});
}

TEST_F(GradCheckTest, GatherOnAnInnerAxis) {
  Variable ids = Ids({2}, {2, -1});
  GradCheck([ids](NDManager& s, V p) { return Gather(s, p[0], ids, 1); }, {RandomParam({3, 4, 2})});
}

TEST_F(GradCheckTest, ReduceMeanAndSum) {
  GradCheck([](NDManager& s, V p) { return ReduceMean(s, p[0], std::vector<std::int64_t>{1}, false); },
            {RandomParam({2, 3, 4})});
  GradCheck([](NDManager& s, V p) { return ReduceSum(s, p[0], {}, true); }, {RandomParam({2, 3})});
  GradCheck([](NDManager& s, V p) { return ReduceSum(s, p[0], std::vector<std::int64_t>{0, -1}, true); },
            {RandomParam({2, 3, 4})});
}

TEST_F(GradCheckTest, ConcatOnAxisOne) {
  GradCheck([](NDManager& s, V p) { return Concat(s, p, 1); },
            {RandomParam({2, 3}), RandomParam({2, 1}), RandomParam({2, 2})});
}

TEST_F(GradCheckTest, ReshapeFlattenNarrow) {
  GradCheck([](NDManager& s, V p) -> absl::StatusOr<Variable> {
    auto r = Reshape(s, p[0], std::vector<std::int64_t>{0, -1});
    if (!r.ok()) return r;
    auto n = Narrow(s, *r, 1, 2, 5);
    if (!n.ok()) return n;
    return Flatten(s, *n, 0);
  }, {RandomParam({2, 3, 4})});
}

TEST_F(GradCheckTest, LayerNormalization) {
  GradCheck([](NDManager& s, V p) { return LayerNorm(s, p[0], p[1], p[2], -1); },
            {RandomParam({3, 6}), RandomParam({6}), RandomParam({6})}, 1e-2f, 2e-2f);
}

TEST_F(GradCheckTest, LstmCell) {
  const std::int64_t batch = 2, in = 3, hidden = 4;
  GradCheck([](NDManager& s, V p) -> absl::StatusOr<Variable> {
    LstmWeights w{p[2], p[3], p[4], p[5]};
    auto next = LstmCell(s, p[0], LstmState{p[1], p[6]}, w);
    if (!next.ok()) return next.status();
    return Concat(s, std::vector<Variable>{next->h, next->c}, 1);
  }, {RandomParam({batch, in}), RandomParam({batch, hidden}), RandomParam({4 * hidden, in}),
      RandomParam({4 * hidden, hidden}), RandomParam({4 * hidden}), RandomParam({4 * hidden}),
      RandomParam({batch, hidden})});
}

TEST_F(GradCheckTest, CrossEntropy) {
  Variable labels = Ids({4}, {0, 2, 1, 2});
  GradCheck([labels](NDManager& s, V p) { return CrossEntropyLoss(s, p[0], labels); },
            {RandomParam({4, 3}, -2.0f, 2.0f)});
}

TEST_F(GradCheckTest, BceWithLogits) {
  Variable targets = Variable::Constant(Array(*trainer_, {2, 3}, {0, 1, 1, 0, 0.5f, 1}));
  GradCheck([targets](NDManager& s, V p) { return BceWithLogitsLoss(s, p[0], targets); },
            {RandomParam({2, 3}, -3.0f, 3.0f)});
}

TEST_F(GradCheckTest, Mse) {
  Variable target = Variable::Constant(Array(*trainer_, {2, 3}, Random(6)));
  GradCheck([target](NDManager& s, V p) { return MseLoss(s, p[0], target); }, {RandomParam({2, 3})});
}

TEST_F(GradCheckTest, BadShapesAreInvalidArgument) {
  EXPECT_TRUE(absl::IsInvalidArgument(Add(*batch_, RandomParam({2, 3}), RandomParam({4})).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MatMul(*batch_, RandomParam({2, 3}), RandomParam({4, 2})).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      Gather(*batch_, RandomParam({3, 2}), Ids({1}, {3}), 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      CrossEntropyLoss(*batch_, RandomParam({2, 3}), Ids({2}, {0, 3})).status()));
}

}  // namespace
}  // namespace ndserve::train
