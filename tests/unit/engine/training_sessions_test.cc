// The training sessions registry: bounded per model, idle sessions expire and give
// their memory back, list and abort.
#include "engine/training_sessions.h"

#include <memory>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/unit/memory/nd_manager_test_util.h"
#include "memory/memory_system.h"

namespace ndserve::engine {
namespace {

using ::ndserve::testing_util::Must;

class TrainingSessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = Must(memory_.NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "model/a:1"));
    b_ = Must(memory_.NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "model/b:1"));
  }
  TrainingSessions::Options Opts(int max, absl::Duration idle) {
    TrainingSessions::Options o;
    o.max_sessions_per_model = max;
    o.idle_timeout = idle;
    o.clock = [this] { return now_; };
    return o;
  }
  std::uint64_t PoolBytes() {
    return Must(memory_.GetPool(Device::Cpu()))->Stats().allocated_bytes;
  }

  MemorySystem memory_;
  std::shared_ptr<NDManager> a_, b_;
  absl::Time now_ = absl::FromUnixSeconds(1000000);
};

TEST_F(TrainingSessionsTest, SessionsPerModelAreBounded) {
  TrainingSessions sessions(Opts(2, absl::Minutes(1)));
  auto s1 = Must(sessions.Start("a", 1, a_));
  auto s2 = Must(sessions.Start("a", 1, a_));
  EXPECT_NE(s1->id(), s2->id());
  absl::StatusOr<std::shared_ptr<TrainingSession>> third = sessions.Start("a", 1, a_);
  ASSERT_FALSE(third.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(third.status()));
  EXPECT_NE(third.status().message().find("'a'"), std::string::npos) << third.status();
  // Another model has its own bound.
  EXPECT_TRUE(sessions.Start("b", 1, b_).ok());
  EXPECT_EQ(sessions.SessionCount("a"), 2);
  // An abort frees a place.
  ASSERT_TRUE(sessions.Abort(s1->id()).ok());
  EXPECT_TRUE(sessions.Start("a", 1, a_).ok());
  // The refused Start left no trainer scope behind.
  EXPECT_EQ(memory_.LevelCounts()[ManagerLevel::kTrainer].live_managers, 3);
}

TEST_F(TrainingSessionsTest, AnIdleSessionIsAbortedAndItsMemoryFreed) {
  TrainingSessions sessions(Opts(4, absl::Minutes(5)));
  const std::uint64_t before = PoolBytes();
  auto idle = Must(sessions.Start("a", 1, a_));
  auto busy = Must(sessions.Start("a", 1, a_));
  ASSERT_TRUE(idle->trainer().Zeros({1 << 16}, DType::kFp32, "adam.m").ok());
  ASSERT_TRUE(busy->trainer().Zeros({1 << 10}, DType::kFp32, "grad").ok());
  const std::uint64_t with_both = PoolBytes();
  EXPECT_GT(with_both, before);

  now_ += absl::Minutes(4);
  ASSERT_TRUE(sessions.Get(busy->id()).ok());  // used: its idle clock restarts
  EXPECT_EQ(sessions.ExpireIdle(), 0);
  now_ += absl::Minutes(2);  // idle: 6 minutes; busy: 2
  EXPECT_EQ(sessions.ExpireIdle(), 1);
  EXPECT_TRUE(idle->trainer().manager()->closed());
  EXPECT_FALSE(busy->trainer().manager()->closed());
  EXPECT_TRUE(absl::IsNotFound(sessions.Get(idle->id()).status()));
  EXPECT_LT(PoolBytes(), with_both);
  // A holder of the expired session cannot step any more.
  EXPECT_TRUE(absl::IsFailedPrecondition(idle->trainer().BeginStep().status()));

  now_ += absl::Minutes(10);
  EXPECT_EQ(sessions.ExpireIdle(), 1);
  EXPECT_EQ(PoolBytes(), before);
  EXPECT_TRUE(sessions.List().empty());
}

// A step holds a use of its session; an Abort meanwhile refuses new uses at once but
// frees the trainer scope only once the step let go, so the step never writes freed
// memory.
TEST_F(TrainingSessionsTest, AnAbortWaitsForTheUseInProgressAndRefusesNewOnes) {
  TrainingSessions sessions(Opts(4, absl::Minutes(5)));
  auto s = Must(sessions.Start("a", 1, a_));
  ASSERT_TRUE(s->trainer().Zeros({256}, DType::kFp32, "grad").ok());
  std::shared_ptr<void> use = Must(s->Enter());
  EXPECT_EQ(s->uses(), 1);
  std::thread abort([&] { EXPECT_TRUE(sessions.Abort(s->id()).ok()); });
  // The abort has begun once new uses are refused.
  for (;;) {
    absl::StatusOr<std::shared_ptr<void>> again = s->Enter();
    if (!again.ok()) {
      EXPECT_TRUE(absl::IsNotFound(again.status())) << again.status();
      break;
    }
    again->reset();
    std::this_thread::yield();
  }
  // ... and waits: the scope the use writes into is still open.
  EXPECT_FALSE(s->trainer().manager()->closed());
  ASSERT_TRUE(s->trainer().Zeros({16}, DType::kFp32, "still.writable").ok());
  use.reset();
  abort.join();
  EXPECT_TRUE(s->trainer().manager()->closed());
  EXPECT_EQ(s->uses(), 0);
}

// However long a step runs, its session is not idle while it does.
TEST_F(TrainingSessionsTest, ASessionInUseDoesNotExpire) {
  TrainingSessions sessions(Opts(4, absl::Minutes(5)));
  auto s = Must(sessions.Start("a", 1, a_));
  std::shared_ptr<void> use = Must(s->Enter());
  now_ += absl::Minutes(30);
  EXPECT_EQ(sessions.ExpireIdle(), 0);
  EXPECT_FALSE(s->trainer().manager()->closed());
  use.reset();
  EXPECT_EQ(sessions.ExpireIdle(), 1);
  EXPECT_TRUE(s->trainer().manager()->closed());
}

TEST_F(TrainingSessionsTest, ListAndAbort) {
  TrainingSessions sessions(Opts(4, absl::Minutes(5)));
  auto s = Must(sessions.Start("a", 7, a_));
  { TrainingStep step = Must(s->trainer().BeginStep()); }
  ASSERT_TRUE(s->trainer().Zeros({25}, DType::kFp32, "grad").ok());
  std::vector<TrainingSessionInfo> rows = sessions.List();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, s->id());
  EXPECT_EQ(rows[0].model, "a");
  EXPECT_EQ(rows[0].version, 7);
  EXPECT_EQ(rows[0].steps, 1);
  EXPECT_EQ(rows[0].trainer_bytes, 100u);
  EXPECT_EQ(rows[0].started, now_);

  ASSERT_TRUE(sessions.Abort(s->id()).ok());
  EXPECT_TRUE(s->trainer().manager()->closed());
  EXPECT_TRUE(absl::IsNotFound(sessions.Abort(s->id())));
  EXPECT_TRUE(absl::IsNotFound(sessions.Get("a/99").status()));
  EXPECT_TRUE(sessions.List().empty());
}

TEST_F(TrainingSessionsTest, DestroyingTheRegistryClosesEverySession) {
  const std::uint64_t before = PoolBytes();
  std::shared_ptr<TrainingSession> kept;
  {
    TrainingSessions sessions(Opts(4, absl::Minutes(5)));
    kept = Must(sessions.Start("b", 1, b_));
    ASSERT_TRUE(kept->trainer().Zeros({1000}, DType::kFp32).ok());
  }
  EXPECT_TRUE(kept->trainer().manager()->closed());
  EXPECT_EQ(PoolBytes(), before);
}

}  // namespace
}  // namespace ndserve::engine
