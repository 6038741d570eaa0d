// Memory invariants of the engine: every byte a request touches lives in its
// PredictorContext; the model and predictor managers are capped and do not grow; a
// load -> predict -> unload -> reclaim cycle gives everything back.

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "engine/engine.h"
#include "engine/served_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/manager_levels.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "tests/unit/engine/engine_test_util.h"
#include "tests/unit/engine/recsys_request.h"

namespace ndserve::engine {
namespace {

using testing::SourceDir;

// recsys with `instances` predictors, from the example repository and its config.
std::shared_ptr<ServedModel> LoadRecsys(int instances, MemorySystem* memory) {
  ModelRepository repo((SourceDir() / "examples/models").string());
  absl::StatusOr<RepositoryModel> m = repo.ReadModel("recsys");
  EXPECT_TRUE(m.ok()) << m.status();
  ModelLoadSpec spec;
  spec.name = "recsys";
  spec.version = 1;
  spec.model_path = ModelRepository::ResolveVersion(*m, 0)->model_path;
  spec.config = m->config;
  spec.device = Device::Cpu();
  spec.instance_count = instances;
  absl::StatusOr<std::shared_ptr<ServedModel>> served = ServedModel::Load(spec, memory);
  EXPECT_TRUE(served.ok()) << served.status();
  return served.value_or(nullptr);
}

using testing::RecsysRequest;

// Each test's models allocate from a memory system of its own, so pool stats and level
// counts see that test's models only.
class MemoryInvariantsTest : public ::testing::Test {
 protected:
  Pool& CpuPool() {
    absl::StatusOr<Pool*> pool = memory_.GetPool(Device::Cpu());
    EXPECT_TRUE(pool.ok()) << pool.status();
    return **pool;
  }
  int64_t TotalCapViolations() {
    int64_t total = 0;
    for (const ManagerLevelCounts& c : memory_.LevelCounts().levels) total += c.cap_violations;
    return total;
  }
  std::shared_ptr<ServedModel> LoadRecsys(int instances) {
    return engine::LoadRecsys(instances, &memory_);
  }

  MemorySystem memory_;
};

TEST_F(MemoryInvariantsTest, TenThousandRecsysPredictionsFromTwoThreadsLeaveNoTrace) {
  NDSERVE_REQUIRE_RECSYS();
  std::shared_ptr<ServedModel> model = LoadRecsys(/*instances=*/2);
  ASSERT_NE(model, nullptr);
  const std::shared_ptr<NDManager>& model_manager = model->model().manager();
  ASSERT_TRUE(model_manager->capped());
  // After warm-up: the reference point.
  const int64_t model_resources = model_manager->resource_count();
  const uint64_t model_bytes = model_manager->bytes();
  std::vector<int64_t> predictor_resources;
  for (const auto& p : model->predictors().predictors()) {
    ASSERT_TRUE(p->manager()->capped());
    predictor_resources.push_back(p->manager()->resource_count());
  }
  const uint64_t allocated = CpuPool().Stats().allocated_bytes;
  const int64_t violations = TotalCapViolations();
  // Tables and (weight, bias) x 3; the feature indices are folded into the fused bags
  // (engine/fusion.h FuseEmbeddingBags), so no array holds them.
  EXPECT_EQ(model_resources, 4 + 3 * 2);
  EXPECT_GE(model_bytes, 4u * 100000 * 32 * 4);

  constexpr int kThreads = 2;
  constexpr int kPerThread = 5000;
  std::atomic<int> failures{0};
  std::atomic<uint64_t> max_peak{0};
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      for (int i = 0; i < kPerThread; ++i) {
        RecsysRequest r(rng());
        absl::StatusOr<InferenceResponse> resp = model->Infer(r.request);
        if (!resp.ok() || resp->outputs.size() != 1 || resp->outputs[0].data.size() != 4) {
          if (failures++ < 3) ADD_FAILURE() << resp.status();
          continue;
        }
        uint64_t peak = max_peak.load();
        while (resp->timings.context_peak_bytes > peak &&
               !max_peak.compare_exchange_weak(peak, resp->timings.context_peak_bytes)) {
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "10000 recsys predictions (batch 1, 2 threads, 2 predictors): " << seconds
            << " s, context peak " << max_peak.load() << " bytes\n";

  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(model->stats().success_count, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(model_manager->resource_count(), model_resources);
  EXPECT_EQ(model_manager->bytes(), model_bytes);
  for (size_t i = 0; i < predictor_resources.size(); ++i) {
    const auto& p = model->predictors().predictors()[i];
    EXPECT_EQ(p->manager()->resource_count(), predictor_resources[i]);
    EXPECT_EQ(p->manager()->child_count(), 0u);  // every context closed
  }
  EXPECT_EQ(CpuPool().Stats().allocated_bytes, allocated);
  EXPECT_EQ(TotalCapViolations(), violations);
  const ManagerLevelSnapshot levels = memory_.LevelCounts();
  EXPECT_EQ(levels[ManagerLevel::kContext].live_managers, 0);
  EXPECT_EQ(levels[ManagerLevel::kContext].attached_resources, 0);
  // One batch-1 request needs a few KiB; anything near a table's 12.8 MB would mean a
  // parameter was copied into the context.
  EXPECT_GT(max_peak.load(), 0u);
  EXPECT_LT(max_peak.load(), 64u * 1024);
  model->Unload();
}

// docs/design.md §2, the embedding leak: an op whose output goes to the manager of its first
// input (DJL's rule) would attach a Gather from the table to the model manager. Here that
// manager is capped, so the attempt fails and is counted instead of leaking; the engine
// itself always puts outputs in the request's context.
TEST_F(MemoryInvariantsTest, EmbeddingLeakIsRefusedByTheCappedModelManager) {
  NDSERVE_REQUIRE_RECSYS();
  std::shared_ptr<ServedModel> model = LoadRecsys(1);
  ASSERT_NE(model, nullptr);
  const Graph& graph = model->model().graph();
  int table = -1;
  for (int i = 0; i < static_cast<int>(graph.initializers().size()); ++i) {
    if (graph.initializers()[i].name == "emb0.table") table = i;
  }
  ASSERT_GE(table, 0);
  const NDArray& params = model->model().initializer(table);
  const int64_t before = memory_.LevelCounts()[ManagerLevel::kModel].cap_violations;
  absl::StatusOr<std::shared_ptr<NDManager>> scope = NDManager::ResultScope(params);
  ASSERT_TRUE(scope.ok());
  EXPECT_EQ(scope->get(), model->model().manager().get());
  absl::StatusOr<NDArray> leaked = (*scope)->Create({8, 32}, DType::kFp32, "gathered");
  EXPECT_EQ(leaked.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(memory_.LevelCounts()[ManagerLevel::kModel].cap_violations, before + 1);

  const int64_t resources = model->model().manager()->resource_count();
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100; ++i) {
    RecsysRequest r(rng());
    ASSERT_TRUE(model->Infer(r.request).ok());
  }
  EXPECT_EQ(model->model().manager()->resource_count(), resources);
  EXPECT_EQ(memory_.LevelCounts()[ManagerLevel::kModel].cap_violations, before + 1);
  model->Unload();
}

TEST_F(MemoryInvariantsTest, LoadPredictUnloadReclaimHundredTimesReturnsReservedBytes) {
  NDSERVE_REQUIRE_RECSYS();
  logging::SetMinSeverity(logging::Severity::kWarning);  // 200 load/unload lines otherwise
  Pool& pool = CpuPool();
  pool.Reclaim(0);
  const PoolStats start = pool.Stats();
  const ManagerLevelSnapshot levels_before = memory_.LevelCounts();
  EngineOptions options;
  options.model_repository = (SourceDir() / "examples/models").string();
  Engine engine(options, &memory_);
  std::mt19937_64 rng(3);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(engine.LoadModel("recsys").ok());
    RecsysRequest r(rng());
    ASSERT_TRUE(engine.Infer(r.request).ok());
    ASSERT_TRUE(engine.UnloadModel("recsys").ok());
    EXPECT_EQ(pool.Stats().allocated_bytes, start.allocated_bytes) << "cycle " << i;
    pool.Reclaim(0);
    ASSERT_EQ(pool.Stats().reserved_bytes, start.reserved_bytes) << "cycle " << i;
  }
  logging::SetMinSeverity(logging::Severity::kInfo);
  std::cout << "100 recsys load/predict/unload/reclaim cycles: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
  const ManagerLevelSnapshot levels_after = memory_.LevelCounts();
  for (ManagerLevel level :
       {ManagerLevel::kModel, ManagerLevel::kPredictor, ManagerLevel::kContext}) {
    EXPECT_EQ(levels_after[level].live_managers, levels_before[level].live_managers);
    EXPECT_EQ(levels_after[level].attached_resources, levels_before[level].attached_resources);
  }
}

}  // namespace
}  // namespace ndserve::engine
