// Many request contexts opening, filling and closing under one predictor at once (the
// daemon's steady state), with parameters borrowed concurrently and a reader walking the
// tree. Run under ThreadSanitizer too (build with -DNDSERVE_SANITIZE=thread).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "memory/nd_manager.h"
#include "tests/unit/memory/nd_manager_test_util.h"

namespace ndserve {
namespace {

constexpr int kThreads = 4;
#if defined(__SANITIZE_THREAD__)
constexpr int kContextsPerThread = 1500;  // TSan is ~10x slower
#else
constexpr int kContextsPerThread = 5000;
#endif

struct Baseline {
  ManagerLevelSnapshot levels;
  std::uint64_t allocated = 0;
};

class NDManagerConcurrencyTest : public testing_util::ScopeTest {
 protected:
  Baseline TakeBaseline() {
    // The system manager exists before the first reading (it is made on first use).
    System();
    return {memory_.LevelCounts(), AllocatedBytes()};
  }

  void ExpectBackTo(const Baseline& baseline) {
    const ManagerLevelSnapshot now = memory_.LevelCounts();
    for (int i = 0; i < kNumManagerLevels; ++i) {
      EXPECT_EQ(now.levels[i].live_managers, baseline.levels.levels[i].live_managers) << i;
      EXPECT_EQ(now.levels[i].attached_resources, baseline.levels.levels[i].attached_resources)
          << i;
      EXPECT_EQ(now.levels[i].attached_bytes, baseline.levels.levels[i].attached_bytes) << i;
    }
    EXPECT_EQ(AllocatedBytes(), baseline.allocated);
  }
};

// One request: inputs in the context, a scratch scope that borrows the parameters and
// returns its result, an array attached from elsewhere, a refused attach to the capped
// predictor, then close.
absl::Status OneRequest(NDManager& predictor, const std::vector<NDArray>& params, int i) {
  absl::StatusOr<std::shared_ptr<NDManager>> opened =
      predictor.NewSubManager(ManagerLevel::kContext);
  if (!opened.ok()) return opened.status();
  ScopedManager ctx(*std::move(opened));
  absl::StatusOr<NDArray> input = ctx->Create({1 + i % 7, 32}, DType::kFp32);
  if (!input.ok()) return input.status();
  absl::StatusOr<float*> data = input->DataAs<float>();
  if (!data.ok()) return data.status();
  (*data)[0] = static_cast<float>(i);

  absl::StatusOr<std::shared_ptr<NDManager>> sub = NDManager::SubManagerOf(*input);
  if (!sub.ok()) return sub.status();
  ScopedManager scratch(*std::move(sub));
  if (absl::Status s = scratch->TempAttachAll(params); !s.ok()) return s;
  absl::StatusOr<NDArray> tmp = scratch->Create({64}, DType::kInt64);
  absl::StatusOr<NDArray> result = scratch->Create({1 + i % 3, 8}, DType::kFp32);
  if (!tmp.ok() || !result.ok()) return absl::InternalError("scratch create failed");
  if (absl::Status s = scratch->Ret(*result); !s.ok()) return s;
  if (i % 2 == 0) scratch.Reset();  // else the context closes it

  // Something made elsewhere, attached to this request.
  absl::StatusOr<std::shared_ptr<NDManager>> side = ctx->NewSubManager();
  if (!side.ok()) return side.status();
  absl::StatusOr<NDArray> moved = (*side)->Zeros({16}, DType::kUint8);
  if (!moved.ok()) return moved.status();
  if (absl::Status s = ctx->Attach(*moved); !s.ok()) return s;
  if (absl::Status s = (*side)->Close(); !s.ok()) return s;
  if (!moved->valid()) return absl::InternalError("attached array freed with its old scope");

  if (i % 10 == 0 && predictor.Attach(*input).ok()) {
    return absl::InternalError("capped predictor took an array");
  }
  if (i % 4 == 0) {
    if (absl::Status s = NDManager::UnsafeFree(*input); !s.ok()) return s;
  }
  ctx.Reset();
  if (result->valid() || moved->valid()) return absl::InternalError("context did not free");
  return absl::OkStatus();
}

TEST_F(NDManagerConcurrencyTest, ContextsOpenAttachAndCloseUnderOnePredictor) {
  const Baseline baseline = TakeBaseline();
  std::shared_ptr<NDManager> model = Base(ManagerLevel::kModel, "model");
  std::vector<NDArray> params = {
      *model->Zeros({256, 32}, DType::kFp32, "w"),
      *model->Zeros({32}, DType::kFp32, "b"),
  };
  model->Cap();
  std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor, "predictor");
  predictor->Cap();
  const std::int64_t violations_before =
      memory_.LevelCounts()[ManagerLevel::kPredictor].cap_violations;

  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  // A metrics scrape and an admin dump running all along.
  std::thread reader([&] {
    while (!done.load()) {
      ManagerLevelSnapshot snapshot = memory_.LevelCounts();
      EXPECT_GE(snapshot[ManagerLevel::kContext].live_managers, 0);
      EXPECT_FALSE(predictor->DebugDump().empty());
      for (const NDArray& p : params) EXPECT_TRUE(p.valid());
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < kContextsPerThread; ++i) {
        absl::Status status = OneRequest(*predictor, params, t * kContextsPerThread + i);
        if (!status.ok()) {
          ADD_FAILURE() << status;
          if (failures.fetch_add(1) > 10) return;
        }
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  done.store(true);
  reader.join();

  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(predictor->child_count(), 0u);
  EXPECT_EQ(predictor->resource_count(), 0);
  EXPECT_EQ(model->resource_count(), 2);  // every borrow came home
  for (const NDArray& p : params) EXPECT_TRUE(model->Holds(p));
  const int attach_attempts = kThreads * kContextsPerThread / 10;
  EXPECT_EQ(memory_.LevelCounts()[ManagerLevel::kPredictor].cap_violations - violations_before,
            attach_attempts);
  ASSERT_TRUE(predictor->Close().ok());
  ASSERT_TRUE(model->Close().ok());
  ExpectBackTo(baseline);
}

// Closing a parent while its children are being opened, filled and closed by other
// threads: every array ends up freed exactly once and nothing is left behind.
TEST_F(NDManagerConcurrencyTest, ClosingTheParentRacesItsChildren) {
  const Baseline baseline = TakeBaseline();
  for (int round = 0; round < 20; ++round) {
    std::shared_ptr<NDManager> predictor = Base(ManagerLevel::kPredictor);
    std::atomic<int> started{0};
    std::vector<std::thread> workers;
    std::vector<std::vector<NDArray>> seen(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      workers.emplace_back([&, t] {
        started.fetch_add(1);
        for (int i = 0;; ++i) {
          absl::StatusOr<std::shared_ptr<NDManager>> ctx =
              predictor->NewSubManager(ManagerLevel::kContext);
          if (!ctx.ok()) return;  // the predictor closed
          absl::StatusOr<NDArray> a = (*ctx)->Create({8 + i % 5}, DType::kFp32);
          if (a.ok()) seen[t].push_back(*a);
          if (i % 3 != 0) (*ctx)->Close().IgnoreError();  // others left to the parent
        }
      });
    }
    while (started.load() < kThreads) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_TRUE(predictor->Close().ok());
    for (std::thread& worker : workers) worker.join();
    for (const auto& arrays : seen) {
      for (const NDArray& a : arrays) EXPECT_FALSE(a.valid());
    }
  }
  ExpectBackTo(baseline);
}

}  // namespace
}  // namespace ndserve
