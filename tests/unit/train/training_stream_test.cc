// TrainingRuns::StreamReadingAhead (docs/design.md §10.1), the Train RPC's core: a reader
// thread pulls the client's batches while the steps run. A client that waits for each
// result still trains (no deadlock), the steps match stepping the same batches from
// host tensors, and a failed step, an Abort or the client's error ends the stream with
// the reader joined and every batch's byte back in the pool.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/blocking_batch_source.h"
#include "tests/unit/train/train_test_util.h"
#include "train/training_runs.h"

namespace ndserve::train {
namespace {

namespace fs = std::filesystem;
using ::ndserve::testing_util::BlockingBatchSource;
using testing_util::Must;

// 16 random rows of the example MLP's 64 features, labels i % 10, input named `input`.
engine::HostBatch MlpBatch(std::uint32_t seed, const std::string& input = "input") {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  engine::HostTensor x{input, DType::kFp32, {16, 64}, std::vector<std::uint8_t>(16 * 64 * 4)};
  std::vector<float> xs(16 * 64);
  for (float& v : xs) v = dist(rng);
  std::memcpy(x.bytes.data(), xs.data(), x.bytes.size());
  engine::HostTensor y{"labels", DType::kInt64, {16}, std::vector<std::uint8_t>(16 * 8)};
  std::vector<std::int64_t> ys(16);
  for (int i = 0; i < 16; ++i) ys[i] = i % 10;
  std::memcpy(y.bytes.data(), ys.data(), y.bytes.size());
  return {std::move(x), std::move(y)};
}

class TrainingStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ndserve_stream_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    repo_ = tmpl;
    const char* root = std::getenv("NDSERVE_SOURCE_DIR");
    const fs::path mlp = fs::path(root != nullptr ? root : ".") / "examples/models/mlp";
    fs::create_directories(repo_ / "mlp/1");
    fs::copy_file(mlp / "config.pbtxt", repo_ / "mlp/config.pbtxt");
    fs::copy_file(mlp / "1/model.onnx", repo_ / "mlp/1/model.onnx");
    engine::EngineOptions options;
    options.model_repository = repo_.string();
    engine_ = std::make_unique<engine::Engine>(options, &memory_);
    ASSERT_TRUE(engine_->LoadModel("mlp").ok());
    runs_ = std::make_unique<TrainingRuns>(engine_.get(), engine::TrainingSessions::Options{});
    TrainingRunOptions run;
    run.loss = LossKind::kCrossEntropy;
    run.target_output = "fc2";
    run.optimizer = OptimizerKind::kMomentum;
    run.lr = 0.05f;
    session_ = Must(runs_->Start("mlp", 0, run)).id;
  }
  // One host step, so that the optimizer's state (made at the first step) is there
  // before a test measures the pool.
  void WarmUp() {
    engine::HostBatch b = MlpBatch(99);
    ASSERT_TRUE(runs_->Step(session_, {b[0]}, b[1]).ok());
  }
  void TearDown() override {
    runs_.reset();
    engine_.reset();
    fs::remove_all(repo_);
  }
  std::uint64_t PoolBytes() {
    return Must(memory_.GetPool(Device::Cpu()))->Stats().allocated_bytes;
  }

  fs::path repo_;
  MemorySystem memory_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<TrainingRuns> runs_;
  std::string session_;
};

TEST_F(TrainingStreamTest, AClientThatWaitsForEachResultTrainsAsHostStepsDo) {
  constexpr int kBatches = 8;
  // The same batches stepped from host tensors in a second session: the reference.
  TrainingRunOptions run;
  run.loss = LossKind::kCrossEntropy;
  run.target_output = "fc2";
  run.optimizer = OptimizerKind::kMomentum;
  run.lr = 0.05f;
  const std::string reference = Must(runs_->Start("mlp", 0, run)).id;
  std::vector<StepResult> want;
  for (int k = 0; k < kBatches; ++k) {
    engine::HostBatch b = MlpBatch(k);
    want.push_back(Must(runs_->Step(reference, {b[0]}, b[1])));
  }
  ASSERT_TRUE(runs_->Abort(reference).ok());

  BlockingBatchSource client;
  client.Push(MlpBatch(0));
  std::vector<StepResult> got;
  int interrupts = 0;
  const absl::Status streamed = runs_->StreamReadingAhead(
      session_, client.AsSource(), [&](const absl::Status&) { ++interrupts; },
      [&](const StepResult& r) {
        got.push_back(r);
        // The client sends the next batch once it has this result, or half-closes.
        if (got.size() < kBatches) {
          client.Push(MlpBatch(got.size()));
        } else {
          client.Close();
        }
        return true;
      });
  ASSERT_TRUE(streamed.ok()) << streamed;
  ASSERT_EQ(got.size(), want.size());
  for (int k = 0; k < kBatches; ++k) {
    EXPECT_EQ(got[k].step, k + 1);
    EXPECT_NEAR(got[k].loss, want[k].loss, 1e-6f) << k;
    EXPECT_NEAR(got[k].grad_norm, want[k].grad_norm, 1e-5f) << k;
    // Batch k+1 comes after step k's result: the step holds only its own.
    EXPECT_EQ(got[k].batches_held, 1) << k;
  }
  EXPECT_EQ(interrupts, 0);
}

TEST_F(TrainingStreamTest, AFailedStepEndsTheStreamWithItsErrorAndFreesTheBatches) {
  WarmUp();
  const std::uint64_t before = PoolBytes();
  BlockingBatchSource client;
  client.Push(MlpBatch(0));
  std::vector<absl::Status> interrupted;
  int results = 0;
  const absl::Status streamed = runs_->StreamReadingAhead(
      session_, client.AsSource(),
      [&](const absl::Status& why) {
        interrupted.push_back(why);
        client.Close(absl::CancelledError("cancelled"));
      },
      [&](const StepResult&) {
        // Batch 1 names an input the model does not have; the client then waits.
        if (++results == 1) client.Push(MlpBatch(1, "inptu"));
        return true;
      });
  EXPECT_TRUE(absl::IsInvalidArgument(streamed)) << streamed;
  EXPECT_NE(streamed.message().find("inptu"), absl::string_view::npos) << streamed;
  EXPECT_EQ(results, 1);
  // If the reader had started waiting for batch 2 when step 1 failed, the interrupt got
  // the step's error (else the reader saw the stop first and pulled nothing); joined and
  // freed either way. (BatchIteratorTest covers the interrupt deterministically.)
  ASSERT_LE(interrupted.size(), 1u);
  if (!interrupted.empty()) EXPECT_EQ(interrupted[0], streamed);
  EXPECT_EQ(PoolBytes(), before);
  // The session goes on.
  engine::HostBatch b = MlpBatch(2);
  EXPECT_EQ(Must(runs_->Step(session_, {b[0]}, b[1])).step, 3);
}

TEST_F(TrainingStreamTest, AClientErrorOrAnAbortEndsTheStreamWithEveryBatchFreed) {
  WarmUp();
  const std::uint64_t before = PoolBytes();
  BlockingBatchSource lost;
  lost.Push(MlpBatch(0));
  lost.Push(MlpBatch(1));
  lost.Close(absl::DataLossError("client went away"));
  int results = 0;
  const absl::Status failed = runs_->StreamReadingAhead(
      session_, lost.AsSource(), [](const absl::Status&) {},
      [&](const StepResult&) {
        ++results;
        return true;
      });
  EXPECT_TRUE(absl::IsDataLoss(failed)) << failed;
  EXPECT_EQ(results, 2);
  EXPECT_EQ(PoolBytes(), before);

  // A client that stops reading results (the sink says stop) while the reader waits.
  BlockingBatchSource gone;
  gone.Push(MlpBatch(2));
  std::vector<absl::Status> interrupted;
  const absl::Status stopped = runs_->StreamReadingAhead(
      session_, gone.AsSource(),
      [&](const absl::Status& why) {
        interrupted.push_back(why);
        gone.Close();
      },
      [&](const StepResult&) {
        gone.AwaitPulls(2);  // the reader waits in the source for batch 1
        return false;
      });
  EXPECT_TRUE(stopped.ok()) << stopped;
  ASSERT_EQ(interrupted.size(), 1u);
  EXPECT_TRUE(interrupted[0].ok());
  EXPECT_EQ(PoolBytes(), before);

  // The session is aborted while the reader waits for the client's next batch (an
  // Abort closes the trainer scope, so it must not race an upload into it): the batch
  // that then comes has no scope to go to, and the stream ends NOT_FOUND.
  BlockingBatchSource ahead;
  ahead.Push(MlpBatch(0));
  ahead.Push(MlpBatch(1));
  results = 0;
  const absl::Status aborted = runs_->StreamReadingAhead(
      session_, ahead.AsSource(), [](const absl::Status&) {},
      [&](const StepResult&) {
        if (++results == 2) {
          ahead.AwaitPulls(3);  // batch 2: not sent yet
          EXPECT_TRUE(runs_->Abort(session_).ok());
          ahead.Push(MlpBatch(2));
          ahead.Close();
        }
        return true;
      });
  EXPECT_TRUE(absl::IsNotFound(aborted)) << aborted;
  EXPECT_EQ(results, 2);
  EXPECT_TRUE(runs_->List().empty());
}

}  // namespace
}  // namespace ndserve::train
