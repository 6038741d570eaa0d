// The dynamic batcher's queue (engine/dynamic_batcher.h), which every model has: a
// request waiting for a busy predictor holds no caller's thread, also without batching;
// a timer answers expired requests while every predictor stays busy; and priority
// levels order the queue, each level under its own queue policy; and a predictor is free
// again before its reply goes out, so that a request sent on that reply takes the fast
// path. Predictors are held busy by LaneHolder (tests/unit/engine/batcher_test_util.h),
// not by a clock.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/dynamic_batcher.h"
#include "engine/served_model.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/batcher_test_util.h"

namespace ndserve::engine {
namespace {

using testing::LaneHolder;
using testing::LoadExample;
using testing::LoadMlpWithPolicy;
using testing::MlpRequest;
using testing::Result;

// No test below waits on a clock for its verdict: the limits are hang guards, reached
// only when the behaviour under test is missing.
constexpr absl::Duration kHangGuard = absl::Seconds(60);

TEST(AsyncBatcherTest, WithoutBatchingAWaitForABusyPredictorHoldsNoCallerThread) {
  MemorySystem memory;
  auto no_batching = [](ModelConfig& c) { c.dynamic_batching.reset(); };
  auto slow = LoadExample(&memory, "mlp", no_batching);
  auto other = LoadExample(&memory, "mlp", no_batching);
  ASSERT_TRUE(slow && other);
  EXPECT_FALSE(slow->dynamic_batching());
  LaneHolder holder(*slow);  // slow's only predictor is busy until Release
  MlpRequest waiting(1), r(2);
  Result pending;
  absl::Notification returned;
  std::thread caller([&] {
    slow->InferAsync(waiting.request, pending.Callback());
    returned.Notify();
  });
  if (!returned.WaitForNotificationWithTimeout(kHangGuard)) {
    holder.Release();
    caller.join();
    FAIL() << "InferAsync held the caller's thread while the predictor was busy";
  }
  EXPECT_FALSE(pending.ready());
  EXPECT_EQ(slow->batcher()->queued(), 1u);
  // The thread that asked is free for another model meanwhile.
  EXPECT_TRUE(other->Infer(r.request).ok());
  EXPECT_FALSE(pending.ready());
  holder.Release();
  caller.join();
  EXPECT_TRUE(pending.Wait().ok());
  EXPECT_TRUE(holder.ok());  // its run counted (it may answer after the others)
  EXPECT_EQ(slow->stats().execution_count, 2u);
}

TEST(ExpiryTimerTest, APassedDeadlineIsAnsweredWhileThePredictorStaysBusy) {
  MemorySystem memory;
  auto model = LoadExample(&memory, "mlp", [](ModelConfig& c) { c.dynamic_batching.reset(); });
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest r(1);
  r.request.deadline = absl::Now() + absl::Milliseconds(20);
  Result a;
  model->InferAsync(r.request, a.Callback());
  // No lane looks at the queue again before Release: only the timer can answer.
  const bool answered = a.WaitFor(kHangGuard);
  holder.Release();
  ASSERT_TRUE(answered) << "the expired request waited for a lane";
  absl::StatusOr<InferenceResponse> got = a.Wait();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_EQ(RejectReason(got.status()), kRejectDeadline);
  EXPECT_EQ(model->batcher()->queued(), 0u);
  EXPECT_TRUE(holder.ok());  // its run counted (it may answer after the others)
  EXPECT_EQ(model->stats().execution_count, 1u) << "only the holder's request ran";
}

TEST(ExpiryTimerTest, AQueuePolicyTimeoutIsAnsweredWhileThePredictorStaysBusy) {
  MemorySystem memory;
  QueuePolicyConfig policy;
  policy.default_timeout_microseconds = 20000;
  auto model = LoadMlpWithPolicy(&memory, policy);
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest first(1), second(2);
  Result a, b;
  model->InferAsync(first.request, a.Callback());
  model->InferAsync(second.request, b.Callback());
  const bool answered = a.WaitFor(kHangGuard) && b.WaitFor(kHangGuard);
  holder.Release();
  ASSERT_TRUE(answered) << "the timed-out requests waited for a lane";
  for (Result* r : {&a, &b}) {
    absl::StatusOr<InferenceResponse> got = r->Wait();
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
    EXPECT_EQ(RejectReason(got.status()), kRejectTimeout);
  }
  EXPECT_TRUE(holder.ok());  // its run counted (it may answer after the others)
  EXPECT_EQ(model->stats().execution_count, 1u);
}

// An mlp with one-row batches (nothing merges) and priority levels 1..3, default 2;
// `edit` adjusts the batching config further.
std::shared_ptr<ServedModel> LoadMlpWithPriorities(
    MemorySystem* memory, const std::function<void(DynamicBatchingConfig&)>& edit = {}) {
  return LoadExample(memory, "mlp", [&](ModelConfig& c) {
    c.max_batch_size = 1;
    c.dynamic_batching.emplace();
    c.dynamic_batching->priority_levels = 3;
    c.dynamic_batching->default_priority_level = 2;
    if (edit) edit(*c.dynamic_batching);
  });
}

TEST(PriorityTest, AHigherPriorityRunsFirstAndUnknownLevelsTakeTheDefault) {
  MemorySystem memory;
  auto model = LoadMlpWithPriorities(&memory);
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest low(1), plain(2), high(3), beyond(4);
  low.request.priority = 3;
  high.request.priority = 1;
  beyond.request.priority = 7;  // no such level: the default, as in Triton
  std::vector<std::string> order;  // appended on the single lane thread
  Result results[4];
  auto submit = [&](MlpRequest& r, const std::string& name, Result& result) {
    model->InferAsync(r.request, [&order, &result, name](absl::StatusOr<InferenceResponse> got) {
      order.push_back(name);
      result.Callback()(std::move(got));
    });
  };
  submit(low, "low", results[0]);
  submit(plain, "plain", results[1]);
  submit(high, "high", results[2]);
  submit(beyond, "beyond", results[3]);
  EXPECT_EQ(model->batcher()->queued(), 4u);
  holder.Release();
  for (Result& r : results) EXPECT_TRUE(r.Wait().ok());
  EXPECT_EQ(order, (std::vector<std::string>{"high", "plain", "beyond", "low"}));
}

TEST(PriorityTest, EachLevelHasItsOwnQueuePolicy) {
  MemorySystem memory;
  auto model = LoadMlpWithPriorities(&memory, [](DynamicBatchingConfig& db) {
    db.priority_queue_policy[3].max_queue_size = 1;
  });
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest low1(1), low2(2), high(3);
  low1.request.priority = low2.request.priority = 3;
  high.request.priority = 1;
  Result a, b, c;
  model->InferAsync(low1.request, a.Callback());
  model->InferAsync(low2.request, b.Callback());
  model->InferAsync(high.request, c.Callback());
  // Level 3 holds one request; the other levels have no limit.
  ASSERT_TRUE(b.ready());
  absl::StatusOr<InferenceResponse> refused = b.Wait();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_EQ(RejectReason(refused.status()), kRejectQueueFull);
  EXPECT_NE(refused.status().message().find("priority level 3"), std::string::npos)
      << refused.status();
  EXPECT_FALSE(c.ready());
  holder.Release();
  EXPECT_TRUE(a.Wait().ok());
  EXPECT_TRUE(c.Wait().ok());
}

TEST(PriorityTest, ALevelsTimeoutAppliesOnlyToThatLevel) {
  MemorySystem memory;
  auto model = LoadMlpWithPriorities(&memory, [](DynamicBatchingConfig& db) {
    db.priority_queue_policy[3].default_timeout_microseconds = 20000;
  });
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest low(1), high(2);
  low.request.priority = 3;
  high.request.priority = 1;
  Result a, b;
  model->InferAsync(low.request, a.Callback());
  model->InferAsync(high.request, b.Callback());
  const bool answered = a.WaitFor(kHangGuard);
  EXPECT_FALSE(b.ready()) << "the level-1 request timed out too";
  holder.Release();
  ASSERT_TRUE(answered);
  EXPECT_EQ(a.Wait().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(b.Wait().ok());
}

// A client that sends its next request as soon as it has the reply: here each next
// request is sent from inside the previous one's `done`, after its reply, before `done`
// returned. The predictor must be free by then, so every request of the chain runs on
// the fast path and none is queued for a lane (which costs a thread wake-up).
TEST(FastPathTest, ARequestSentOnTheLastReplyRunsOnTheCallersThread) {
  constexpr int kRequests = 20;
  const std::vector<std::function<void(ModelConfig&)>> configs = {
      [](ModelConfig&) {},  // the example's dynamic_batching { }: no queue delay
      [](ModelConfig& c) { c.dynamic_batching.reset(); }};
  for (const auto& config : configs) {
    MemorySystem memory;
    auto model = LoadExample(&memory, "mlp", config);
    ASSERT_TRUE(model);
    std::vector<std::unique_ptr<MlpRequest>> requests;
    for (int i = 0; i < kRequests; ++i) requests.push_back(std::make_unique<MlpRequest>(i));
    std::vector<Result> results(kRequests);
    std::function<void(int)> send = [&](int i) {
      model->InferAsync(requests[i]->request, [&, i](absl::StatusOr<InferenceResponse> r) {
        results[i].Callback()(std::move(r));
        if (i + 1 < kRequests) send(i + 1);
      });
    };
    send(0);
    for (Result& r : results) ASSERT_TRUE(r.Wait().ok());
    const DynamicBatcher::Stats stats = model->batcher()->stats();
    EXPECT_EQ(stats.caller_runs, static_cast<uint64_t>(kRequests))
        << "a request sent on the last reply found the predictor still in use";
    EXPECT_EQ(stats.lane_runs, 0u);
  }
}

TEST(FastPathTest, ALaneGivesThePredictorBackBeforeItsReplies) {
  MemorySystem memory;
  auto model = LoadMlpWithPolicy(&memory, QueuePolicyConfig{});
  ASSERT_TRUE(model);
  LaneHolder holder(*model);
  MlpRequest queued(1), next(2);
  Result a, b;
  // Queued behind the holder, so it runs on the lane; its reply sends the next request.
  model->InferAsync(queued.request, [&](absl::StatusOr<InferenceResponse> r) {
    a.Callback()(std::move(r));
    model->InferAsync(next.request, b.Callback());
  });
  EXPECT_EQ(model->batcher()->queued(), 1u);
  holder.Release();
  EXPECT_TRUE(a.Wait().ok());
  EXPECT_TRUE(b.Wait().ok());
  EXPECT_TRUE(holder.ok());
  const DynamicBatcher::Stats stats = model->batcher()->stats();
  EXPECT_EQ(stats.lane_runs, 1u) << "the next request waited for the lane's reply to end";
  EXPECT_EQ(stats.caller_runs, 2u);  // the holder's and the next one
}

}  // namespace
}  // namespace ndserve::engine
