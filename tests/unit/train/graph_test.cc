// The graph's life cycle: gradients cleared in place, history cut, scopes respected.

#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/train/train_test_util.h"
#include "train/elementwise_ops.h"
#include "train/linear_ops.h"
#include "train/losses.h"
#include "train/reduce_ops.h"

namespace ndserve::train {
namespace {

using testing_util::Must;
using testing_util::TrainTest;

class GraphTest : public TrainTest {};

TEST_F(GraphTest, ClearGradZeroesTheSameArrayInPlace) {
  Variable w = Param({3}, {1, 2, 3});
  const NDArray grad_before = w.grad();
  Variable y = Must(Mul(*batch_, w, w));
  Variable loss = Must(ReduceSum(*batch_, y, {}, false));
  ASSERT_TRUE(Backward(loss, *batch_).ok());
  EXPECT_EQ(Must(w.grad().ToVector<float>()), (std::vector<float>{2, 4, 6}));
  // A second backward accumulates, as in PyTorch.
  ASSERT_TRUE(Backward(loss, *batch_).ok());
  EXPECT_EQ(Must(w.grad().ToVector<float>()), (std::vector<float>{4, 8, 12}));
  ASSERT_TRUE(ClearGrad({w}).ok());
  EXPECT_TRUE(w.grad().SameArray(grad_before));
  EXPECT_EQ(Must(w.grad().ToVector<float>()), (std::vector<float>{0, 0, 0}));
  EXPECT_TRUE(trainer_->Holds(w.grad()));
}

TEST_F(GraphTest, NoGraphWithoutParameters) {
  Variable a = Variable::Constant(Array(*batch_, {2}, {1, 2}));
  Variable y = Must(Add(*batch_, a, a));
  EXPECT_TRUE(y.is_leaf());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(absl::IsInvalidArgument(Backward(y, *batch_)));
}

TEST_F(GraphTest, UnchainBackwardKeepsTheValueAndDropsTheHistory) {
  Variable w = Param({2}, {1, 2});
  Variable h = Must(Mul(*batch_, w, w));
  h = Must(Add(*batch_, h, w));
  EXPECT_EQ(GraphNodeCount(h), 2);
  UnchainBackward(h);
  EXPECT_EQ(GraphNodeCount(h), 0);
  EXPECT_FALSE(h.requires_grad());
  EXPECT_EQ(Must(h.value().ToVector<float>()), (std::vector<float>{2, 6}));
  EXPECT_TRUE(w.requires_grad());  // parameters stay trainable
}

TEST_F(GraphTest, TemporariesLiveInTheBatchScope) {
  Variable w = Param({2, 2}, {1, 2, 3, 4});
  Variable x = Variable::Constant(Array(*batch_, {1, 2}, {1, 1}));
  Variable y = Must(MatMul(*batch_, x, w));
  Variable loss = Must(ReduceSum(*batch_, y, {}, false));
  ASSERT_TRUE(Backward(loss, *batch_).ok());
  EXPECT_TRUE(batch_->Holds(y.value()));
  const std::int64_t trainer_arrays = trainer_->resource_count();
  ASSERT_TRUE(batch_->Close().ok());
  EXPECT_EQ(trainer_->resource_count(), trainer_arrays);
  EXPECT_FALSE(y.value().valid());
  EXPECT_TRUE(w.grad().valid());
  EXPECT_EQ(Must(w.grad().ToVector<float>()), (std::vector<float>{1, 1, 1, 1}));
}

TEST_F(GraphTest, AnOpIntoTheCappedTrainerScopeIsACapViolation) {
  Variable w = Param({2}, {1, 2});
  trainer_->Cap();
  EXPECT_TRUE(Add(*batch_, w, w).ok());
  const absl::StatusOr<Variable> leaked = Add(*trainer_, w, w);
  EXPECT_TRUE(absl::IsFailedPrecondition(leaked.status())) << leaked.status();
  EXPECT_EQ(memory_.LevelCounts()[ManagerLevel::kTrainer].cap_violations, 1);
}

TEST_F(GraphTest, BackwardThroughAClosedStepIsAnErrorNotACrash) {
  Variable w = Param({2}, {1, 2});
  Variable x = Variable::Constant(Array(*batch_, {2}, {3, 4}));
  Variable y = Must(Mul(*batch_, x, w));  // its backward reads x
  Variable loss = Must(ReduceSum(*batch_, y, {}, false));
  ASSERT_TRUE(batch_->Close().ok());
  auto next = Must(trainer_->NewSubManager(ManagerLevel::kBatch));
  const absl::Status status = Backward(loss, *next);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
}

}  // namespace
}  // namespace ndserve::train
