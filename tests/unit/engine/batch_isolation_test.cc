// The dynamic batcher under faults and overload (engine/dynamic_batcher.h): a request
// whose data makes a merged run fail fails alone; the queue policy refuses a full queue
// and drops timed-out requests without running them; and a request waiting for company
// holds no caller's thread. No wall-clock bounds: batches are made to run by filling
// them, and lanes are held by a `done` callback that waits for the test
// (tests/unit/engine/batcher_test_util.h).
#include <cstring>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/dynamic_batcher.h"
#include "engine/served_model.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/batcher_test_util.h"
#include "tests/unit/engine/recsys_request.h"

namespace ndserve::engine {
namespace {

using testing::FullBatchesOnly;
using testing::LaneHolder;
using testing::LoadExample;
using testing::LoadMlpWithPolicy;
using testing::MlpRequest;
using testing::PassInstant;
using testing::RecsysRequest;
using testing::Result;

// A recsys request whose ids[0][2][5], when `bad_id` is set, is that id.
std::unique_ptr<RecsysRequest> MakeRecsys(uint64_t seed, std::optional<int64_t> bad_id) {
  auto r = std::make_unique<RecsysRequest>(seed);
  if (bad_id) r->id(2, 5) = *bad_id;
  return r;
}

TEST(BatchIsolationTest, ABadIdFailsOnlyItsOwnRequestAndNamesOnlyItsOwnValue) {
  NDSERVE_REQUIRE_RECSYS();
  constexpr int kRequests = 9;  // every third carries an out-of-range id of its own
  MemorySystem memory;
  auto batched = LoadExample(&memory, "recsys", FullBatchesOnly(kRequests));
  auto alone = LoadExample(&memory, "recsys", [](ModelConfig& c) { c.dynamic_batching.reset(); });
  ASSERT_TRUE(batched && alone);
  std::vector<std::unique_ptr<RecsysRequest>> requests;
  auto bad_id = [](int i) { return RecsysRequest::kTableRows + 1000 + i * 7; };
  for (int i = 0; i < kRequests; ++i) {
    requests.push_back(MakeRecsys(
        i, i % 3 == 0 ? std::optional<int64_t>(bad_id(i)) : std::nullopt));
  }
  // Submitted from threads at once, as clients would; the batch runs when all nine are in.
  std::vector<Result> results(kRequests);
  std::latch start(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      start.arrive_and_wait();
      batched->InferAsync(requests[i]->request, results[i].Callback());
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    absl::StatusOr<InferenceResponse> got = results[i].Wait();
    if (i % 3 == 0) {
      ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << i << ": " << got.status();
      const std::string message(got.status().message());
      EXPECT_NE(message.find(absl::StrCat(bad_id(i))), std::string::npos) << message;
      for (int j = 0; j < kRequests; j += 3) {
        if (j != i) EXPECT_EQ(message.find(absl::StrCat(bad_id(j))), std::string::npos) << message;
      }
      // Its position within its own request (ids[0][2][5] -> row 0, element 5).
      EXPECT_NE(message.find("indices[5]"), std::string::npos) << message;
      continue;
    }
    ASSERT_TRUE(got.ok()) << i << ": " << got.status();
    EXPECT_EQ(got->id, requests[i]->request.id);
    absl::StatusOr<InferenceResponse> reference = alone->Infer(requests[i]->request);
    ASSERT_TRUE(reference.ok()) << reference.status();
    ASSERT_EQ(got->outputs.size(), 1u);
    ASSERT_EQ(got->outputs[0].data.size(), sizeof(float));
    float a, b;
    std::memcpy(&a, got->outputs[0].data.data(), sizeof(float));
    std::memcpy(&b, reference->outputs[0].data.data(), sizeof(float));
    EXPECT_NEAR(a, b, 1e-5) << i;
  }
  const ModelStatsSnapshot s = batched->stats();
  EXPECT_EQ(s.success_count, 6u);
  EXPECT_EQ(s.fail_count, 3u);
  EXPECT_EQ(s.execution_count, 6u) << "the six good requests each reran alone";
}

TEST(BatchIsolationTest, AGoodBatchStillRunsAsOne) {
  NDSERVE_REQUIRE_RECSYS();
  MemorySystem memory;
  auto batched = LoadExample(&memory, "recsys", FullBatchesOnly(4));
  ASSERT_TRUE(batched);
  std::vector<std::unique_ptr<RecsysRequest>> requests;
  std::vector<Result> results(4);
  for (int i = 0; i < 4; ++i) {
    requests.push_back(MakeRecsys(50 + i, std::nullopt));
    batched->InferAsync(requests[i]->request, results[i].Callback());
  }
  for (Result& r : results) ASSERT_TRUE(r.Wait().ok());
  EXPECT_EQ(batched->stats().execution_count, 1u);
}


TEST(QueuePolicyTest, AFullQueueRefusesAtOnceWithUnavailable) {
  MemorySystem memory;
  QueuePolicyConfig policy;
  policy.max_queue_size = 2;
  auto model = LoadMlpWithPolicy(&memory, policy);
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest r1(1), r2(2), r3(3);
  Result a, b, c;
  model->InferAsync(r1.request, a.Callback());
  model->InferAsync(r2.request, b.Callback());
  EXPECT_EQ(model->batcher()->queued(), 2u);
  model->InferAsync(r3.request, c.Callback());
  // Answered before InferAsync returned, while the lane is still held.
  ASSERT_TRUE(c.ready());
  absl::StatusOr<InferenceResponse> refused = c.Wait();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_EQ(RejectReason(refused.status()), kRejectQueueFull);
  EXPECT_FALSE(a.ready());
  holder.Release();
  EXPECT_TRUE(a.Wait().ok());
  EXPECT_TRUE(b.Wait().ok());
  EXPECT_TRUE(holder.ok());
  EXPECT_EQ(model->stats().execution_count, 3u);
}


TEST(QueuePolicyTest, ATimedOutRequestNeverRuns) {
  MemorySystem memory;
  QueuePolicyConfig policy;
  policy.allow_timeout_override = true;  // the holder has no timeout; the others their own
  auto model = LoadMlpWithPolicy(&memory, policy);
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest timed(1), on_time(2);
  timed.request.timeout_microseconds = 1;
  Result a, b;
  model->InferAsync(timed.request, a.Callback());
  model->InferAsync(on_time.request, b.Callback());
  PassInstant(absl::Now());
  holder.Release();
  absl::StatusOr<InferenceResponse> late = a.Wait();
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_EQ(RejectReason(late.status()), kRejectTimeout);
  EXPECT_TRUE(b.Wait().ok());
  EXPECT_TRUE(holder.ok());  // its run counted (it may answer after the others)
  EXPECT_EQ(model->stats().execution_count, 2u) << "the timed-out request ran";
}

TEST(QueuePolicyTest, TheRequestsOwnTimeoutCountsOnlyWhereAllowed) {
  MemorySystem memory;
  auto model = LoadMlpWithPolicy(&memory, QueuePolicyConfig{});
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest r(1);
  r.request.timeout_microseconds = 1;
  Result a;
  model->InferAsync(r.request, a.Callback());
  PassInstant(absl::Now());
  holder.Release();
  EXPECT_TRUE(a.Wait().ok());
}

TEST(QueuePolicyTest, APassedClientDeadlineNeverRuns) {
  MemorySystem memory;
  auto model = LoadMlpWithPolicy(&memory, QueuePolicyConfig{});
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest r(1);
  r.request.deadline = absl::Now();
  Result a;
  model->InferAsync(r.request, a.Callback());
  holder.Release();
  absl::StatusOr<InferenceResponse> got = a.Wait();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_EQ(RejectReason(got.status()), kRejectDeadline);
  EXPECT_TRUE(holder.ok());  // its run counted (it may answer after the others)
  EXPECT_EQ(model->stats().execution_count, 1u);
}

TEST(QueuePolicyTest, WithoutBatchingAPassedDeadlineAlsoNeverRuns) {
  MemorySystem memory;
  auto model = LoadExample(&memory, "mlp", [](ModelConfig& c) { c.dynamic_batching.reset(); });
  ASSERT_TRUE(model);
  MlpRequest r(1);
  r.request.deadline = absl::Now();
  absl::StatusOr<InferenceResponse> got = model->Infer(r.request);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_EQ(model->stats().execution_count, 0u);
}

TEST(QueuePolicyTest, DelayRunsTimedOutRequestsAfterTheOnTimeOnes) {
  MemorySystem memory;
  QueuePolicyConfig policy;
  policy.timeout_action = QueuePolicyConfig::TimeoutAction::kDelay;
  policy.allow_timeout_override = true;
  auto model = LoadMlpWithPolicy(&memory, policy);
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest late(1), on_time(2);
  late.request.timeout_microseconds = 1;
  std::vector<std::string> order;  // appended on the single lane thread
  Result a, b;
  model->InferAsync(late.request, [&](absl::StatusOr<InferenceResponse> r) {
    order.push_back("late");
    a.Callback()(std::move(r));
  });
  model->InferAsync(on_time.request, [&](absl::StatusOr<InferenceResponse> r) {
    order.push_back("on_time");
    b.Callback()(std::move(r));
  });
  PassInstant(absl::Now());
  holder.Release();
  EXPECT_TRUE(a.Wait().ok()) << "DELAY still runs it";
  EXPECT_TRUE(b.Wait().ok());
  EXPECT_EQ(order, (std::vector<std::string>{"on_time", "late"}));
}

TEST(AsyncBatcherTest, AWaitingBatchHoldsNoCallerThread) {
  // Model "slow" gathers for ten minutes; one thread submits to it and then serves
  // another model, whose answer comes while slow's request still waits.
  MemorySystem memory;
  auto slow = LoadExample(&memory, "mlp", FullBatchesOnly(64));
  auto fast = LoadExample(&memory, "mlp", [](ModelConfig& c) { c.dynamic_batching.reset(); });
  ASSERT_TRUE(slow && fast);
  MlpRequest waiting(1), other(2);
  Result pending;
  slow->InferAsync(waiting.request, pending.Callback());
  EXPECT_FALSE(pending.ready());
  EXPECT_EQ(slow->batcher()->queued(), 1u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(fast->Infer(other.request).ok());
  EXPECT_FALSE(pending.ready()) << "the gathering batch ran early";
  // Unloading answers the waiting request instead of running it.
  slow->Unload();
  absl::StatusOr<InferenceResponse> got = pending.Wait();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_EQ(slow->stats().execution_count, 0u);
}

TEST(AsyncBatcherTest, AFullBatchRunsWithoutWaitingForItsDelay) {
  MemorySystem memory;
  auto slow = LoadExample(&memory, "mlp", FullBatchesOnly(2));
  ASSERT_TRUE(slow);
  MlpRequest a(1), b(2);
  Result ra, rb;
  slow->InferAsync(a.request, ra.Callback());
  slow->InferAsync(b.request, rb.Callback());
  EXPECT_TRUE(ra.Wait().ok());
  EXPECT_TRUE(rb.Wait().ok());
  EXPECT_EQ(slow->stats().execution_count, 1u);
}

}  // namespace
}  // namespace ndserve::engine
