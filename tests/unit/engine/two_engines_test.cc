// Two engines, each on its own MemorySystem with its own limit, side by side in one
// process: a model that does not fit under one engine's limit serves fine on the other,
// and each memory system's pool and manager counts see only its own engine's work.

#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "memory/memory_config.h"
#include "memory/memory_system.h"
#include "tests/unit/engine/engine_test_util.h"
#include "tests/unit/engine/recsys_request.h"

namespace ndserve::engine {
namespace {

using testing::SourceDir;

using testing::RecsysRequest;

// An mlp request of `rows` rows.
struct MlpRequest {
  explicit MlpRequest(int64_t rows) : bytes(rows * 64 * 4, 0) {
    request.model_name = "mlp";
    request.inputs.push_back({"input", DType::kFp32, {rows, 64}, absl::MakeConstSpan(bytes)});
  }
  std::vector<uint8_t> bytes;
  InferenceRequest request;
};

PoolStats CpuStats(MemorySystem& memory) {
  absl::StatusOr<Pool*> pool = memory.GetPool(Device::Cpu());
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? (*pool)->Stats() : PoolStats();
}

TEST(TwoEnginesTest, EachEngineLivesWithinItsOwnMemorySystem) {
  NDSERVE_REQUIRE_RECSYS();
  MemoryConfig tight_config;
  tight_config.limit.unlimited = false;
  tight_config.limit.bytes = 16 << 20;  // recsys's tables alone are 49 MiB
  MemorySystem tight(tight_config);
  MemorySystem roomy;
  EngineOptions options;
  options.model_repository = (SourceDir() / "examples/models").string();
  Engine small(options, &tight);
  Engine big(options, &roomy);

  // The same model: refused under the tight limit, loaded without one.
  absl::Status refused = small.LoadModel("recsys");
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  ASSERT_TRUE(big.LoadModel("recsys").ok());
  EXPECT_FALSE(small.IsModelReady("recsys"));
  EXPECT_TRUE(big.IsModelReady("recsys"));
  EXPECT_EQ(CpuStats(tight).allocated_bytes, 0u) << "nothing stays after the failed load";
  EXPECT_GE(CpuStats(tight).oom_count, 1u);
  EXPECT_EQ(CpuStats(roomy).oom_count, 0u);
  EXPECT_GE(CpuStats(roomy).allocated_bytes, 49u << 20);

  // mlp fits under both.
  ASSERT_TRUE(small.LoadModel("mlp").ok());
  ASSERT_TRUE(big.LoadModel("mlp").ok());
  EXPECT_LT(CpuStats(tight).allocated_bytes, 16u << 20);
  EXPECT_EQ(tight.LevelCounts()[ManagerLevel::kModel].live_managers, 1);  // mlp
  EXPECT_EQ(roomy.LevelCounts()[ManagerLevel::kModel].live_managers, 2);  // mlp, recsys

  // Requests on one engine allocate from its pool only, even while the other serves.
  const PoolStats tight_before = CpuStats(tight);
  const PoolStats roomy_before = CpuStats(roomy);
  for (int i = 0; i < 20; ++i) {
    RecsysRequest r(i);
    ASSERT_TRUE(big.Infer(r.request).ok());
  }
  const PoolStats roomy_after_big = CpuStats(roomy);
  EXPECT_GT(roomy_after_big.alloc_count, roomy_before.alloc_count);
  EXPECT_EQ(CpuStats(tight).alloc_count, tight_before.alloc_count);
  for (int i = 0; i < 20; ++i) {
    MlpRequest r(8);
    ASSERT_TRUE(small.Infer(r.request).ok());
  }
  EXPECT_GT(CpuStats(tight).alloc_count, tight_before.alloc_count);
  EXPECT_EQ(CpuStats(roomy).alloc_count, roomy_after_big.alloc_count);

  // Both at once, from two threads.
  std::thread on_big([&] {
    for (int i = 0; i < 200; ++i) {
      RecsysRequest r(1000 + i);
      absl::Status s = big.Infer(r.request).status();
      if (!s.ok()) {
        ADD_FAILURE() << s;
        return;
      }
    }
  });
  for (int i = 0; i < 200; ++i) {
    MlpRequest r(1 + i % 64);
    absl::Status s = small.Infer(r.request).status();
    if (!s.ok()) {
      ADD_FAILURE() << s;
      break;
    }
  }
  on_big.join();
  EXPECT_EQ(CpuStats(tight).allocated_bytes, tight_before.allocated_bytes);
  EXPECT_EQ(CpuStats(roomy).allocated_bytes, roomy_before.allocated_bytes);
  EXPECT_EQ(CpuStats(tight).oom_count, tight_before.oom_count);
  EXPECT_EQ(CpuStats(roomy).oom_count, 0u);

  // Unloading on one leaves the other's models and memory alone.
  ASSERT_TRUE(small.UnloadModel("mlp").ok());
  EXPECT_EQ(CpuStats(tight).allocated_bytes, 0u);
  EXPECT_EQ(CpuStats(roomy).allocated_bytes, roomy_before.allocated_bytes);
  EXPECT_TRUE(big.IsModelReady("mlp"));
  MlpRequest r(2);
  EXPECT_TRUE(big.Infer(r.request).ok());
}

}  // namespace
}  // namespace ndserve::engine
