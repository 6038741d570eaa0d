// Trainer and batch scopes (docs/design.md §2.1): a step's arrays live in its batch
// scope and go at step end, the session's memory is flat from step to step, the model
// and trainer scopes refuse a step's arrays (counted as cap violations), and closing the
// session gives every byte back.
#include "engine/training_scopes.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/memory/nd_manager_test_util.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"

namespace ndserve::engine {
namespace {

using ::ndserve::testing_util::Must;

bool IsCapError(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) &&
         status.message().find("capped") != absl::string_view::npos;
}

constexpr std::int64_t kIn = 8;
constexpr std::int64_t kOut = 4;
constexpr std::int64_t kRows = 16;

class TrainingScopesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Must(memory_.NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "model/linear:1"));
    std::vector<float> w(kIn * kOut);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 7);
    weight_ = Must(model_->FromHostValues<float>({kIn, kOut}, w, "weight"));
    model_->Cap();
  }

  std::uint64_t AllocatedBytes() {
    return Must(memory_.GetPool(Device::Cpu()))->Stats().allocated_bytes;
  }

  // One SGD step of y = x W against a target of zeros (loss = mean(y^2)), every
  // temporary made in the step's batch scope and W updated in place in the trainer's.
  void SgdStep(TrainerScope& trainer, const NDArray& w, const NDArray& grad, int step) {
    TrainingStep s = Must(trainer.BeginStep());
    ASSERT_NE(s.batch(), nullptr);
    std::vector<float> xs(kRows * kIn);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>((i + step) % 5) - 2;
    NDArray x = Must(s.batch()->FromHostValues<float>({kRows, kIn}, xs, "x"));
    NDArray y = Must(s.batch()->Create({kRows, kOut}, DType::kFp32, "y"));
    const float* px = Must(x.DataAs<float>());
    float* py = Must(y.DataAs<float>());
    float* pw = Must(w.DataAs<float>());
    float* pg = Must(grad.DataAs<float>());
    for (std::int64_t r = 0; r < kRows; ++r) {
      for (std::int64_t o = 0; o < kOut; ++o) {
        float acc = 0;
        for (std::int64_t i = 0; i < kIn; ++i) acc += px[r * kIn + i] * pw[i * kOut + o];
        py[r * kOut + o] = acc;
      }
    }
    // ClearGrad-style: the gradient array is the trainer's and is reused, never remade.
    for (std::int64_t i = 0; i < kIn * kOut; ++i) pg[i] = 0;
    for (std::int64_t r = 0; r < kRows; ++r) {
      for (std::int64_t i = 0; i < kIn; ++i) {
        for (std::int64_t o = 0; o < kOut; ++o) {
          pg[i * kOut + o] += 2.0f * px[r * kIn + i] * py[r * kOut + o] / (kRows * kOut);
        }
      }
    }
    for (std::int64_t i = 0; i < kIn * kOut; ++i) pw[i] -= 0.01f * pg[i];
    ASSERT_TRUE(s.End().ok());
  }

  MemorySystem memory_;
  std::shared_ptr<NDManager> model_;
  NDArray weight_;
};

TEST_F(TrainingScopesTest, StepArraysAreFreedAtStepEnd) {
  std::shared_ptr<TrainerScope> trainer = Must(TrainerScope::Open(model_, "s1"));
  const std::uint64_t before = AllocatedBytes();
  NDArray activation;
  {
    TrainingStep step = Must(trainer->BeginStep());
    activation = Must(step.batch()->Create({1024}, DType::kFp32, "activation"));
    EXPECT_GT(AllocatedBytes(), before);
    EXPECT_EQ(step.batch()->level(), ManagerLevel::kBatch);
    EXPECT_TRUE(trainer->in_step());
  }  // the destructor ends the step
  EXPECT_FALSE(trainer->in_step());
  EXPECT_EQ(trainer->steps_completed(), 1);
  EXPECT_EQ(AllocatedBytes(), before);
  absl::StatusOr<void*> data = activation.Data();
  ASSERT_FALSE(data.ok());
  EXPECT_NE(data.status().message().find("use of freed memory"), absl::string_view::npos);
}

TEST_F(TrainingScopesTest, PoolBytesAfterStep10AndStep10000AreEqual) {
  std::shared_ptr<TrainerScope> trainer = Must(TrainerScope::Open(model_, "flat"));
  NDArray w = Must(trainer->CopyOf(weight_, "weight.trained"));
  NDArray grad = Must(trainer->Zeros({kIn, kOut}, DType::kFp32, "weight.grad"));
  int step = 0;
  for (; step < 10; ++step) SgdStep(*trainer, w, grad, step);
  const std::uint64_t after_10 = AllocatedBytes();
  const std::uint64_t trainer_after_10 = trainer->manager()->bytes();
  const std::int64_t trainer_arrays_after_10 = trainer->manager()->resource_count();
  for (; step < 10000; ++step) SgdStep(*trainer, w, grad, step);
  EXPECT_EQ(trainer->steps_completed(), 10000);
  EXPECT_EQ(AllocatedBytes(), after_10);
  EXPECT_EQ(trainer->manager()->bytes(), trainer_after_10);
  EXPECT_EQ(trainer->manager()->resource_count(), trainer_arrays_after_10);
  // The training did something (the parameter copy moved, the model's did not).
  EXPECT_NE(Must(w.ToVector<float>()), Must(weight_.ToVector<float>()));
}

TEST_F(TrainingScopesTest, AttachingToTrainerOrModelDuringAStepIsACapViolation) {
  std::shared_ptr<TrainerScope> trainer = Must(TrainerScope::Open(model_, "caps"));
  const ManagerLevelSnapshot before = memory_.LevelCounts();
  TrainingStep step = Must(trainer->BeginStep());
  EXPECT_TRUE(trainer->manager()->capped());
  EXPECT_TRUE(model_->capped());

  // Creating straight in the trainer or model scope.
  EXPECT_TRUE(IsCapError(trainer->manager()->Create({4}, DType::kFp32, "leak").status()));
  EXPECT_TRUE(IsCapError(model_->Create({4}, DType::kFp32, "leak").status()));
  // Keeping a step's array past the step (Ret to the parent, Attach to either scope).
  NDArray kept = Must(step.batch()->Create({4}, DType::kFp32, "kept"));
  EXPECT_TRUE(IsCapError(step.batch()->Ret(kept)));
  EXPECT_TRUE(IsCapError(trainer->manager()->Attach(kept)));
  EXPECT_TRUE(IsCapError(model_->Attach(kept)));
  // The session's own helpers refuse too, with their own message.
  EXPECT_TRUE(absl::IsFailedPrecondition(trainer->Zeros({4}, DType::kFp32).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(trainer->CopyOf(weight_).status()));
  // A second step while one is open.
  EXPECT_TRUE(absl::IsFailedPrecondition(trainer->BeginStep().status()));

  const ManagerLevelSnapshot during = memory_.LevelCounts();
  EXPECT_EQ(
      during[ManagerLevel::kTrainer].cap_violations - before[ManagerLevel::kTrainer].cap_violations,
      3);
  EXPECT_EQ(
      during[ManagerLevel::kModel].cap_violations - before[ManagerLevel::kModel].cap_violations, 2);
  EXPECT_TRUE(step.batch()->Holds(kept));

  ASSERT_TRUE(step.End().ok());
  // Between steps the trainer takes session state again; the model stays capped.
  EXPECT_FALSE(trainer->manager()->capped());
  EXPECT_TRUE(model_->capped());
  EXPECT_TRUE(trainer->Zeros({4}, DType::kFp32, "state").ok());
}

TEST_F(TrainingScopesTest, ClosingTheSessionReturnsEveryByte) {
  const std::uint64_t before = AllocatedBytes();
  std::shared_ptr<TrainerScope> trainer = Must(TrainerScope::Open(model_, "closing"));
  NDArray w = Must(trainer->CopyOf(weight_));
  NDArray m = Must(trainer->Zeros({kIn, kOut}, DType::kFp32, "adam.m"));
  NDArray v = Must(trainer->Zeros({kIn, kOut}, DType::kFp32, "adam.v"));
  TrainingStep step = Must(trainer->BeginStep());
  ASSERT_TRUE(step.batch()->Create({256, 256}, DType::kFp32, "activations").ok());
  EXPECT_GT(AllocatedBytes(), before);

  // Closed with a step still open: the batch scope goes with it.
  ASSERT_TRUE(trainer->Close().ok());
  EXPECT_EQ(AllocatedBytes(), before);
  EXPECT_TRUE(step.batch()->closed());
  EXPECT_TRUE(step.End().ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(trainer->BeginStep().status()));
  EXPECT_FALSE(w.Data().ok());
  // The model's parameters are untouched.
  EXPECT_TRUE(weight_.Data().ok());
}

TEST_F(TrainingScopesTest, TrainerAndBatchLevelsAppearInLevelCountsAndDebugDump) {
  std::shared_ptr<TrainerScope> trainer = Must(TrainerScope::Open(model_, "visible"));
  ASSERT_TRUE(trainer->Zeros({100}, DType::kFp32, "grad").ok());
  TrainingStep step = Must(trainer->BeginStep());
  ASSERT_TRUE(step.batch()->Create({50}, DType::kFp32, "x").ok());

  // What the ndserve_manager_* metrics are made of (server/memory_collector.cc).
  const ManagerLevelSnapshot counts = memory_.LevelCounts();
  EXPECT_EQ(counts[ManagerLevel::kTrainer].live_managers, 1);
  EXPECT_EQ(counts[ManagerLevel::kTrainer].attached_resources, 1);
  EXPECT_EQ(counts[ManagerLevel::kTrainer].attached_bytes, 400);
  EXPECT_EQ(counts[ManagerLevel::kBatch].live_managers, 1);
  EXPECT_EQ(counts[ManagerLevel::kBatch].attached_resources, 1);
  EXPECT_EQ(counts[ManagerLevel::kBatch].attached_bytes, 200);

  const std::string dump = memory_.DebugDumpAll();
  EXPECT_NE(dump.find("trainer/visible"), std::string::npos) << dump;
  EXPECT_NE(dump.find("level=trainer"), std::string::npos) << dump;
  EXPECT_NE(dump.find("level=batch"), std::string::npos) << dump;

  ASSERT_TRUE(step.End().ok());
  const ManagerLevelSnapshot after = memory_.LevelCounts();
  EXPECT_EQ(after[ManagerLevel::kBatch].live_managers, 0);
  EXPECT_EQ(after[ManagerLevel::kBatch].attached_bytes, 0);
}

TEST_F(TrainingScopesTest, ClosingTheModelClosesTheSession) {
  std::shared_ptr<TrainerScope> trainer = Must(TrainerScope::Open(model_, "orphan"));
  ASSERT_TRUE(model_->Close().ok());
  EXPECT_TRUE(trainer->manager()->closed());
  EXPECT_TRUE(absl::IsFailedPrecondition(trainer->BeginStep().status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(TrainerScope::Open(model_, "late").status()));
}

}  // namespace
}  // namespace ndserve::engine
