#ifndef NDSERVE_TESTS_UNIT_ENGINE_BATCHER_TEST_UTIL_H_
#define NDSERVE_TESTS_UNIT_ENGINE_BATCHER_TEST_UTIL_H_

// What the dynamic batcher tests share: loading an example model with an edited config,
// mlp requests, a thread-safe result collector, and LaneHolder, which keeps a model's
// only predictor busy until the test lets go, so that no test waits on a clock.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/repository.h"
#include "engine/served_model.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine::testing {

inline constexpr int64_t kMlpFeatures = 64;

// Loads example `name` with one predictor; `edit` adjusts its config first.
inline std::shared_ptr<ServedModel> LoadExample(MemorySystem* memory, const std::string& name,
                                                const std::function<void(ModelConfig&)>& edit) {
  ModelRepository repo((SourceDir() / "examples/models").string());
  absl::StatusOr<RepositoryModel> m = repo.ReadModel(name);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return nullptr;
  ModelLoadSpec spec;
  spec.name = name;
  spec.model_path = ModelRepository::ResolveVersion(*m, 0)->model_path;
  spec.config = m->config;
  EXPECT_TRUE(spec.config.has_value());
  edit(*spec.config);
  spec.device = Device::Cpu();
  spec.instance_count = 1;
  absl::StatusOr<std::shared_ptr<ServedModel>> served = ServedModel::Load(spec, memory);
  EXPECT_TRUE(served.ok()) << served.status();
  return served.value_or(nullptr);
}

// Dynamic batching that only runs a batch once it is full (the delay is far longer
// than any test), `rows` rows at most.
inline std::function<void(ModelConfig&)> FullBatchesOnly(int rows) {
  return [rows](ModelConfig& c) {
    c.max_batch_size = rows;
    c.dynamic_batching.emplace();
    c.dynamic_batching->max_queue_delay_microseconds = 600ull * 1000 * 1000;
  };
}

// Collects one InferAsync result; thread-safe.
class Result {
 public:
  ServedModel::InferDone Callback() {
    return [this](absl::StatusOr<InferenceResponse> r) {
      absl::MutexLock lock(&mu_);
      result_ = std::move(r);
    };
  }
  bool ready() {
    absl::MutexLock lock(&mu_);
    return result_.has_value();
  }
  // Waits at most `limit` (a hang guard, not a speed bound); whether the result came.
  bool WaitFor(absl::Duration limit) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(
        absl::Condition(
            +[](std::optional<absl::StatusOr<InferenceResponse>>* r) { return r->has_value(); },
            &result_),
        limit);
  }
  absl::StatusOr<InferenceResponse> Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::optional<absl::StatusOr<InferenceResponse>>* r) { return r->has_value(); },
        &result_));
    return *result_;
  }

 private:
  absl::Mutex mu_;
  std::optional<absl::StatusOr<InferenceResponse>> result_ ABSL_GUARDED_BY(mu_);
};

struct MlpRequest {
  explicit MlpRequest(uint64_t seed) : input(kMlpFeatures) {
    std::mt19937_64 rng(seed);
    for (float& x : input) x = static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
    request.model_name = "mlp";
    request.inputs.push_back({"input", DType::kFp32, {1, kMlpFeatures},
                              absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(input.data()),
                                                  input.size() * sizeof(float))});
  }
  std::vector<float> input;
  InferenceRequest request;
};

// An mlp whose batches are one row (so nothing merges) under `policy`.
inline std::shared_ptr<ServedModel> LoadMlpWithPolicy(MemorySystem* memory,
                                                      QueuePolicyConfig policy) {
  return LoadExample(memory, "mlp", [&](ModelConfig& c) {
    c.max_batch_size = 1;
    c.dynamic_batching.emplace();
    c.dynamic_batching->default_queue_policy = policy;
  });
}

// Keeps `model`'s only predictor busy until Release(): runs a request of its own that
// blocks inside its run (the batcher's before-run test hook), as a long computation
// would. The reply does not hold the predictor (engine/dynamic_batcher.h), so blocking
// in `done` would not do. From a thread of its own, because a lone request on an idle
// model runs on the caller's thread (the batcher's fast path). Sets the model's hook.
class LaneHolder {
 public:
  static constexpr const char* kRequestId = "lane-holder";

  explicit LaneHolder(ServedModel& model) : state_(std::make_shared<State>()) {
    state_->request.request.id = kRequestId;
    // Shared with the hook, which the model keeps after this holder is gone.
    model.SetBeforeRunForTesting([state = state_](const InferenceRequest& r) {
      if (r.id != kRequestId) return;
      state->entered.Notify();
      state->released.WaitForNotification();
    });
    thread_ = std::thread([this, &model] {
      model.InferAsync(state_->request.request, state_->result.Callback());
    });
    state_->entered.WaitForNotification();
  }
  ~LaneHolder() {
    Release();
    thread_.join();
  }
  void Release() {
    if (!state_->released.HasBeenNotified()) state_->released.Notify();
  }
  // Whether the holder's request succeeded; waits for its answer.
  bool ok() { return state_->result.Wait().ok(); }

 private:
  struct State {
    MlpRequest request{999};
    absl::Notification entered, released;
    Result result;
  };
  std::shared_ptr<State> state_;
  std::thread thread_;
};

// Waits until `t` is in the past, so that a timeout of a microsecond surely expired.
inline void PassInstant(absl::Time t) {
  while (absl::Now() <= t + absl::Microseconds(2)) std::this_thread::yield();
}

}  // namespace ndserve::engine::testing

#endif  // NDSERVE_TESTS_UNIT_ENGINE_BATCHER_TEST_UTIL_H_
