// Truncated BPTT: carrying the recurrent state with CarriedState keeps the graph at one
// step's nodes and the pool flat; carrying the variable itself keeps every step's history.

#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/train/train_test_util.h"
#include "train/carried_state.h"
#include "train/linear_ops.h"
#include "train/losses.h"
#include "train/lstm_cell.h"
#include "train/optimizer.h"
#include "train/reduce_ops.h"

namespace ndserve::train {
namespace {

using testing_util::Must;
using testing_util::TrainTest;

class BpttTest : public TrainTest {
 protected:
  void SetUp() override {
    TrainTest::SetUp();
    w_ = LstmWeights{RandomParam({16, 2}), RandomParam({16, 4}), RandomParam({16}), RandomParam({16})};
  }
  std::vector<Variable> Params() const { return {w_.w_ih, w_.w_hh, w_.b_ih, w_.b_hh}; }
  // `length` LSTM steps from `state` on constant inputs.
  LstmState Unroll(NDManager& s, LstmState state, int length) {
    Variable x = Variable::Constant(Array(s, {3, 2}, Random(6)));
    for (int t = 0; t < length; ++t) state = Must(LstmCell(s, x, state, w_));
    return state;
  }
  LstmWeights w_;
};

TEST_F(BpttTest, CarriedStateBoundsTheGraphAndThePool) {
  constexpr int kLength = 3;
  CarriedState carried = Must(CarriedState::Create(*trainer_, {{3, 4}, {3, 4}}));
  auto optimizer = Must(Sgd::Create(Params(), SgdOptions{0.01f}, *trainer_));
  std::int64_t first_count = -1;
  std::uint64_t after_10 = 0;
  for (int step = 1; step <= 500; ++step) {
    auto batch = Must(trainer_->NewSubManager(ManagerLevel::kBatch));
    std::vector<Variable> hc = carried.Load();
    LstmState next = Unroll(*batch, LstmState{hc[0], hc[1]}, kLength);
    const std::int64_t count = GraphNodeCount(next.h);
    if (first_count < 0) first_count = count;
    EXPECT_EQ(count, first_count) << "step " << step;
    Variable loss = Must(ReduceMean(*batch, next.h, {}, false));
    ASSERT_TRUE(Backward(loss, *batch).ok());
    ASSERT_TRUE(optimizer->Step().ok());
    ASSERT_TRUE(ClearGrad(Params()).ok());
    ASSERT_TRUE(carried.Carry({next.h, next.c}).ok());
    EXPECT_EQ(GraphNodeCount(next.h), 0);
    ASSERT_TRUE(batch->Close().ok());
    if (step == 10) after_10 = AllocatedBytes();
  }
  EXPECT_GT(first_count, 0);
  EXPECT_EQ(AllocatedBytes(), after_10);
  // The carried value survived the closed batches.
  EXPECT_TRUE(carried.Load()[0].value().valid());
}

TEST_F(BpttTest, WithoutUnchainingTheGraphGrowsEveryStep) {
  // One long-lived scope so that the old values stay readable: what carrying the
  // variable itself would need.
  LstmState state{Variable::Constant(Array(*batch_, {3, 4}, std::vector<float>(12, 0))),
                  Variable::Constant(Array(*batch_, {3, 4}, std::vector<float>(12, 0)))};
  std::int64_t previous = 0;
  for (int step = 0; step < 5; ++step) {
    state = Unroll(*batch_, state, 3);
    const std::int64_t count = GraphNodeCount(state.h);
    EXPECT_GT(count, previous);
    previous = count;
  }
  const std::int64_t grown = previous;
  UnchainBackward(state.h);
  UnchainBackward(state.c);
  state = Unroll(*batch_, state, 3);
  EXPECT_LT(GraphNodeCount(state.h), grown / 4);
}

}  // namespace
}  // namespace ndserve::train
