// Eager batch iteration (docs/design.md §2.1): batch k+1 is uploaded before step k runs,
// batch k is freed when the step asks for the next, and never more than two batches are
// held, which the pool's bytes show as well as the iterator's counters.
#include "engine/batch_iterator.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/training_scopes.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/blocking_batch_source.h"
#include "tests/unit/memory/nd_manager_test_util.h"

namespace ndserve::engine {
namespace {

using ::ndserve::testing_util::BlockingBatchSource;
using ::ndserve::testing_util::Must;

constexpr std::int64_t kRows = 256;
constexpr std::int64_t kFeatures = 64;
// Inputs (fp32) plus labels (fp32): what one batch takes from the pool, as created.
constexpr std::uint64_t kBatchBytes = kRows * kFeatures * 4 + kRows * 4;

HostBatch MakeBatch(int k) {
  HostTensor x{"x", DType::kFp32, {kRows, kFeatures}, {}};
  std::vector<float> xs(kRows * kFeatures, static_cast<float>(k));
  x.bytes.resize(xs.size() * 4);
  std::memcpy(x.bytes.data(), xs.data(), x.bytes.size());
  HostTensor y{"label", DType::kFp32, {kRows}, {}};
  std::vector<float> ys(kRows, static_cast<float>(-k));
  y.bytes.resize(ys.size() * 4);
  std::memcpy(y.bytes.data(), ys.data(), y.bytes.size());
  return {std::move(x), std::move(y)};
}

BatchIterator::Source CountingSource(int n, int* pulled) {
  return [n, pulled]() -> absl::StatusOr<std::optional<HostBatch>> {
    if (*pulled >= n) return std::optional<HostBatch>();
    return std::optional<HostBatch>(MakeBatch((*pulled)++));
  };
}

class BatchIteratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = Must(memory_.NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "model/m:1"));
    model_->Cap();
    trainer_ = Must(TrainerScope::Open(model_, "iter"));
  }
  std::uint64_t PoolBytes() {
    return Must(memory_.GetPool(Device::Cpu()))->Stats().allocated_bytes;
  }

  MemorySystem memory_;
  std::shared_ptr<NDManager> model_;
  std::shared_ptr<TrainerScope> trainer_;
};

TEST_F(BatchIteratorTest, UploadsTheNextBatchBeforeTheStepAndNeverHoldsMoreThanTwo) {
  constexpr int kBatches = 50;
  int pulled = 0;
  std::unique_ptr<BatchIterator> it =
      Must(BatchIterator::Create(trainer_->manager(), CountingSource(kBatches, &pulled)));
  const std::uint64_t base = PoolBytes();
  std::uint64_t peak_pool = base;
  int steps = 0;
  for (;;) {
    const DeviceBatch* batch = Must(it->Next());
    if (batch == nullptr) break;
    TrainingStep step = Must(trainer_->BeginStep());
    EXPECT_EQ(batch->index, steps);
    // Batch k+1 was pulled and uploaded before step k runs (except after the last).
    EXPECT_EQ(pulled, std::min(steps + 2, kBatches));
    EXPECT_EQ(it->live_batches(), steps + 1 < kBatches ? 2 : 1);
    const NDArray* x = batch->Find("x");
    const NDArray* label = batch->Find("label");
    ASSERT_NE(x, nullptr);
    ASSERT_NE(label, nullptr);
    EXPECT_EQ(Must(x->ToVector<float>())[0], static_cast<float>(steps));
    EXPECT_EQ(Must(label->ToVector<float>())[kRows - 1], static_cast<float>(-steps));
    // The step's own arrays go to its batch scope.
    ASSERT_TRUE(step.batch()->Create({kRows, kFeatures}, DType::kFp32, "h").ok());
    peak_pool = std::max(peak_pool, PoolBytes());
    const std::uint64_t held = it->live_batches() * kBatchBytes;
    EXPECT_LE(held, 2 * kBatchBytes);
    ASSERT_TRUE(step.End().ok());
    // The step's scope is gone; what is left is the batches the iterator holds.
    EXPECT_GE(PoolBytes() - base, held);
    EXPECT_LT(PoolBytes() - base, held + kBatchBytes);
    ++steps;
  }
  EXPECT_EQ(steps, kBatches);
  EXPECT_EQ(it->batches_uploaded(), kBatches);
  EXPECT_EQ(it->peak_live_batches(), 2);
  // Two batches plus one step's activations at most, however many batches went by.
  EXPECT_LT(peak_pool - base, 3 * kBatchBytes + kBatchBytes);
  // At the end every batch has been freed.
  EXPECT_EQ(it->live_batches(), 0);
  EXPECT_EQ(PoolBytes(), base);
}

TEST_F(BatchIteratorTest, ASourceThatIsNotReadyIsNotReadAhead) {
  // A client that sends batch k+1 only after step k's result: reading ahead would wait
  // for a batch that comes after the step, so the pull waits for the next Next.
  constexpr int kBatches = 6;
  int pulled = 0;
  bool ready = false;
  std::unique_ptr<BatchIterator> it = Must(BatchIterator::Create(
      trainer_->manager(), CountingSource(kBatches, &pulled), [&ready] { return ready; }));
  for (int k = 0; k < kBatches; ++k) {
    const DeviceBatch* batch = Must(it->Next());
    ASSERT_NE(batch, nullptr);
    EXPECT_EQ(batch->index, k);
    EXPECT_EQ(Must(batch->Find("x")->ToVector<float>())[0], static_cast<float>(k));
    EXPECT_EQ(pulled, k + 1);
    EXPECT_EQ(it->live_batches(), 1);
  }
  EXPECT_EQ(Must(it->Next()), nullptr);
  EXPECT_EQ(it->peak_live_batches(), 1);

  // Once the source says a batch is there, the iterator reads ahead again.
  pulled = 0;
  it = Must(BatchIterator::Create(trainer_->manager(), CountingSource(kBatches, &pulled),
                                  [&ready] { return ready; }));
  ASSERT_NE(Must(it->Next()), nullptr);
  EXPECT_EQ(pulled, 1);
  ready = true;
  ASSERT_NE(Must(it->Next()), nullptr);
  EXPECT_EQ(pulled, 3);
  EXPECT_EQ(it->live_batches(), 2);
}

TEST_F(BatchIteratorTest, BatchKIsFreedWhenTheNextIsAskedFor) {
  int pulled = 0;
  std::unique_ptr<BatchIterator> it =
      Must(BatchIterator::Create(trainer_->manager(), CountingSource(3, &pulled)));
  const DeviceBatch* first = Must(it->Next());
  ASSERT_NE(first, nullptr);
  NDArray x0 = *first->Find("x");
  std::shared_ptr<NDManager> scope0 = first->manager;
  EXPECT_EQ(scope0->level(), ManagerLevel::kBatch);
  ASSERT_TRUE(x0.Data().ok());
  ASSERT_NE(Must(it->Next()), nullptr);
  EXPECT_TRUE(scope0->closed());
  absl::StatusOr<void*> gone = x0.Data();
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("use of freed memory"), absl::string_view::npos);
}

TEST_F(BatchIteratorTest, DestroyingTheIteratorOrClosingTheTrainerFreesTheBatches) {
  const std::uint64_t base = PoolBytes();
  int pulled = 0;
  {
    std::unique_ptr<BatchIterator> it =
        Must(BatchIterator::Create(trainer_->manager(), CountingSource(10, &pulled)));
    ASSERT_NE(Must(it->Next()), nullptr);
    EXPECT_GT(PoolBytes(), base);
  }
  EXPECT_EQ(PoolBytes(), base);
  std::unique_ptr<BatchIterator> it =
      Must(BatchIterator::Create(trainer_->manager(), CountingSource(10, &pulled)));
  ASSERT_NE(Must(it->Next()), nullptr);
  ASSERT_TRUE(trainer_->Close().ok());
  EXPECT_EQ(PoolBytes(), base);
}

TEST_F(BatchIteratorTest, BadTensorsAndSourceErrorsEndTheIteration) {
  int calls = 0;
  std::unique_ptr<BatchIterator> it = Must(BatchIterator::Create(
      trainer_->manager(), [&calls]() -> absl::StatusOr<std::optional<HostBatch>> {
        ++calls;
        HostBatch b = MakeBatch(0);
        b[1].bytes.pop_back();
        return std::optional<HostBatch>(std::move(b));
      }));
  absl::StatusOr<const DeviceBatch*> bad = it->Next();
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("'label'"), std::string::npos) << bad.status();

  std::unique_ptr<BatchIterator> failing = Must(
      BatchIterator::Create(trainer_->manager(), []() -> absl::StatusOr<std::optional<HostBatch>> {
        return absl::DataLossError("client went away");
      }));
  EXPECT_TRUE(absl::IsDataLoss(failing->Next().status()));
  EXPECT_EQ(Must(failing->Next()), nullptr);

  EXPECT_TRUE(absl::IsInvalidArgument(BatchIterator::Create(nullptr, nullptr).status()));
}

// Read-ahead mode (docs/design.md §10.1): a client that sends ahead finds batch k+1 read
// and uploaded by the reader thread while step k runs, and never more than two held.
TEST_F(BatchIteratorTest, ReadingAheadUploadsBatchKPlusOneOnTheReaderThreadWhileStepKRuns) {
  constexpr int kBatches = 20;
  BlockingBatchSource client;
  for (int k = 0; k < kBatches; ++k) client.Push(MakeBatch(k));
  client.Close();
  const std::uint64_t base = PoolBytes();
  int interrupts = 0;
  std::unique_ptr<BatchIterator> it =
      Must(BatchIterator::CreateReadAhead(trainer_->manager(), client.AsSource(),
                                          [&interrupts](const absl::Status&) { ++interrupts; }));
  for (int k = 0; k < kBatches; ++k) {
    const DeviceBatch* batch = Must(it->Next());
    ASSERT_NE(batch, nullptr);
    EXPECT_EQ(batch->index, k);
    EXPECT_EQ(Must(batch->Find("x")->ToVector<float>())[0], static_cast<float>(k));
    // "Step k": the reader uploads batch k+1 meanwhile, with no Next from this thread.
    const std::int64_t want = std::min(k + 2, kBatches);
    while (it->batches_uploaded() < want) absl::SleepFor(absl::Milliseconds(1));
    EXPECT_EQ(it->live_batches(), k + 1 < kBatches ? 2 : 1) << k;
    const std::uint64_t held = it->live_batches() * kBatchBytes;
    EXPECT_GE(PoolBytes() - base, held) << k;
    EXPECT_LT(PoolBytes() - base, held + kBatchBytes) << k;
    // Bounded: the reader waits for batch k to go before it pulls batch k+2.
    EXPECT_LE(client.pulls(), k + 2) << k;
  }
  EXPECT_EQ(Must(it->Next()), nullptr);
  EXPECT_EQ(it->peak_live_batches(), 2);
  EXPECT_EQ(it->live_batches(), 0);
  EXPECT_EQ(PoolBytes(), base);
  it.reset();
  // The reader ended on the client's half-close: nothing to interrupt.
  EXPECT_EQ(interrupts, 0);
}

// A client that sends batch k+1 only after step k's result: the reader waits for it, the
// steps do not (no deadlock), and each step holds only its own batch.
TEST_F(BatchIteratorTest, ReadingAheadServesAClientThatWaitsForEachResult) {
  constexpr int kBatches = 5;
  BlockingBatchSource client;
  std::unique_ptr<BatchIterator> it = Must(BatchIterator::CreateReadAhead(
      trainer_->manager(), client.AsSource(), [](const absl::Status&) {}));
  for (int k = 0; k < kBatches; ++k) {
    client.Push(MakeBatch(k));
    const DeviceBatch* batch = Must(it->Next());
    ASSERT_NE(batch, nullptr);
    EXPECT_EQ(batch->index, k);
    // The reader is already waiting for batch k+1, which the client has not sent.
    client.AwaitPulls(k + 2);
    EXPECT_EQ(it->live_batches(), 1);
  }
  client.Close();
  EXPECT_EQ(Must(it->Next()), nullptr);
  // A batch sent once the previous result is out may be uploaded before the previous
  // batch is freed (the next Next frees it): two at most, as ever.
  EXPECT_LE(it->peak_live_batches(), 2);
}

// A step that fails while the reader waits for a client that waits for the step's result:
// Stop interrupts the pull with the step's status, joins the reader and frees every
// batch; when the reader is not in a pull, nothing is interrupted.
TEST_F(BatchIteratorTest, StoppingInterruptsAPendingPullJoinsTheReaderAndFreesEveryByte) {
  const std::uint64_t base = PoolBytes();
  BlockingBatchSource client;
  std::vector<absl::Status> interrupted;
  std::unique_ptr<BatchIterator> it = Must(BatchIterator::CreateReadAhead(
      trainer_->manager(), client.AsSource(), [&](const absl::Status& why) {
        interrupted.push_back(why);
        client.Close(absl::CancelledError("cancelled"));  // what gRPC's Read then does
      }));
  client.Push(MakeBatch(0));
  ASSERT_NE(Must(it->Next()), nullptr);
  client.AwaitPulls(2);
  EXPECT_GT(PoolBytes(), base);
  it->Stop(absl::InvalidArgumentError("step 1 failed"));
  ASSERT_EQ(interrupted.size(), 1u);
  EXPECT_TRUE(absl::IsInvalidArgument(interrupted[0])) << interrupted[0];
  EXPECT_EQ(it->live_batches(), 0);
  EXPECT_EQ(PoolBytes(), base);
  EXPECT_EQ(Must(it->Next()), nullptr);
  it.reset();
  EXPECT_EQ(interrupted.size(), 1u);

  // A client that sent ahead: the reader holds two batches and waits for room, not in
  // a pull; destroying the iterator stops it without an interrupt.
  BlockingBatchSource ahead;
  for (int k = 0; k < 4; ++k) ahead.Push(MakeBatch(k));
  int interrupts = 0;
  it = Must(BatchIterator::CreateReadAhead(trainer_->manager(), ahead.AsSource(),
                                           [&interrupts](const absl::Status&) { ++interrupts; }));
  ASSERT_NE(Must(it->Next()), nullptr);
  while (it->batches_uploaded() < 2) absl::SleepFor(absl::Milliseconds(1));
  it.reset();
  EXPECT_EQ(interrupts, 0);
  EXPECT_EQ(ahead.pulls(), 2);
  EXPECT_EQ(PoolBytes(), base);
}

// The reader's errors (a bad tensor, the source's own) come out of Next after the batches
// read before them, and end the iteration.
TEST_F(BatchIteratorTest, ReadingAheadReportsTheReadersErrorAfterTheBatchesBeforeIt) {
  const std::uint64_t base = PoolBytes();
  BlockingBatchSource client;
  client.Push(MakeBatch(0));
  HostBatch bad = MakeBatch(1);
  bad[0].bytes.pop_back();
  client.Push(std::move(bad));
  std::unique_ptr<BatchIterator> it = Must(BatchIterator::CreateReadAhead(
      trainer_->manager(), client.AsSource(), [](const absl::Status&) {}));
  ASSERT_NE(Must(it->Next()), nullptr);
  absl::StatusOr<const DeviceBatch*> failed = it->Next();
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(failed.status())) << failed.status();
  EXPECT_NE(failed.status().message().find("'x'"), std::string::npos) << failed.status();
  EXPECT_EQ(Must(it->Next()), nullptr);
  EXPECT_EQ(PoolBytes(), base);

  BlockingBatchSource lost;
  lost.Push(MakeBatch(0));
  lost.Close(absl::DataLossError("client went away"));
  it = Must(BatchIterator::CreateReadAhead(trainer_->manager(), lost.AsSource(),
                                           [](const absl::Status&) {}));
  ASSERT_NE(Must(it->Next()), nullptr);
  EXPECT_TRUE(absl::IsDataLoss(it->Next().status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      BatchIterator::CreateReadAhead(trainer_->manager(), lost.AsSource(), nullptr).status()));
}

// Each upload holds the guard's token while it writes (a training session's use, so
// that an Abort waits for it) and lets go once its bytes landed; a refused guard ends
// the iteration with its error, in both modes.
TEST_F(BatchIteratorTest, EachUploadHoldsTheGuardWhileItWritesAndARefusalEndsIt) {
  int taken = 0;
  std::shared_ptr<int> held = std::make_shared<int>(0);
  bool refuse = false;
  auto guard = [&]() -> absl::StatusOr<std::shared_ptr<void>> {
    if (refuse) return absl::NotFoundError("training session 's' is being aborted");
    ++taken;
    ++*held;
    return std::shared_ptr<void>(held.get(), [held](void*) { --*held; });
  };
  int pulled = 0;
  std::unique_ptr<BatchIterator> it =
      Must(BatchIterator::Create(trainer_->manager(), CountingSource(3, &pulled), nullptr, guard));
  ASSERT_NE(Must(it->Next()), nullptr);
  EXPECT_EQ(*held, 0);  // on the CPU the bytes land inside the upload
  EXPECT_EQ(taken, 2);  // batch 0, and batch 1 uploaded ahead
  refuse = true;
  // Batch 2's upload starts in this Next, and is refused.
  absl::StatusOr<const DeviceBatch*> refused = it->Next();
  EXPECT_TRUE(absl::IsNotFound(refused.status())) << refused.status();

  refuse = false;
  taken = 0;
  BlockingBatchSource client;
  client.Push(MakeBatch(0));
  client.Push(MakeBatch(1));
  client.Close(absl::OkStatus());
  it = Must(BatchIterator::CreateReadAhead(trainer_->manager(), client.AsSource(),
                                           [](const absl::Status&) {}, guard));
  ASSERT_NE(Must(it->Next()), nullptr);
  ASSERT_NE(Must(it->Next()), nullptr);
  EXPECT_EQ(Must(it->Next()), nullptr);
  EXPECT_EQ(taken, 2);
  EXPECT_EQ(*held, 0);
}

}  // namespace
}  // namespace ndserve::engine
