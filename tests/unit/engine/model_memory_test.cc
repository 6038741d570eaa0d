// Exact memory per model: ServedModel::MemoryUsage is the sum of the model's manager
// tree, and unloading drops the pool's allocated bytes by exactly that figure.

#include <cstdint>
#include <memory>
#include <string>

#include "engine/model_memory.h"
#include "engine/repository.h"
#include "engine/served_model.h"
#include "gtest/gtest.h"
#include "memory/memory_config.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "tests/unit/engine/engine_test_util.h"

namespace ndserve::engine {
namespace {

using testing::SourceDir;

// Every held block's bytes in the subtree, from the block list rather than the
// per-manager sums MemoryUsage reads.
std::uint64_t SumBlocks(const ManagerNodeInfo& node) {
  std::uint64_t sum = 0;
  for (const HeldBlock& b : node.blocks) sum += b.bytes;
  for (const ManagerNodeInfo& child : node.children) sum += SumBlocks(child);
  return sum;
}

class ModelMemoryTest : public ::testing::TestWithParam<PoolKind> {
 protected:
  ModelMemoryTest() : memory_(MemoryConfig{.pool = GetParam()}) {}

  std::shared_ptr<ServedModel> LoadRecsys(int instances) {
    ModelRepository repo((SourceDir() / "examples/models").string());
    absl::StatusOr<RepositoryModel> m = repo.ReadModel("recsys");
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return nullptr;
    ModelLoadSpec spec;
    spec.name = "recsys";
    spec.version = 1;
    spec.model_path = ModelRepository::ResolveVersion(*m, 0)->model_path;
    spec.config = m->config;
    spec.device = Device::Cpu();
    spec.instance_count = instances;
    absl::StatusOr<std::shared_ptr<ServedModel>> served = ServedModel::Load(spec, &memory_);
    EXPECT_TRUE(served.ok()) << served.status();
    return served.value_or(nullptr);
  }

  std::uint64_t Allocated() {
    absl::StatusOr<Pool*> pool = memory_.GetPool(Device::Cpu());
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? (*pool)->Stats().allocated_bytes : 0;
  }

  MemorySystem memory_;
};

TEST_P(ModelMemoryTest, FigureIsTheManagerTreeAndUnloadFreesExactlyIt) {
  NDSERVE_REQUIRE_RECSYS();
  std::shared_ptr<ServedModel> model = LoadRecsys(/*instances=*/2);
  ASSERT_NE(model, nullptr);

  const std::vector<ModelMemoryUsage> usage = model->MemoryUsage();
  std::uint64_t total = 0;
  std::uint64_t parameters = 0;
  for (const ModelMemoryUsage& u : usage) {
    EXPECT_EQ(u.device, Device::Cpu());
    total += u.bytes;
    if (u.kind == kMemoryKindParameters) parameters = u.bytes;
  }
  ASSERT_EQ(usage.size(), 3u);  // parameters, workspace, state on cpu:0
  const ManagerNodeInfo tree = model->model().manager()->DebugInfo(/*with_blocks=*/true);
  EXPECT_EQ(total, SumBlocks(tree));
  // Four 100000 x 32 fp32 tables at least, as rounded by the pool.
  EXPECT_GE(parameters, 4u * 100000 * 32 * 4);
  EXPECT_GE(parameters, tree.bytes);

  const std::uint64_t before = Allocated();
  model->Unload();
  EXPECT_TRUE(model->MemoryUsage().empty());
  EXPECT_EQ(before - Allocated(), total);
}

INSTANTIATE_TEST_SUITE_P(Pools, ModelMemoryTest,
                         ::testing::Values(PoolKind::kBinned, PoolKind::kSplit, PoolKind::kSimple,
                                           PoolKind::kNone),
                         [](const ::testing::TestParamInfo<PoolKind>& info) {
                           return std::string(PoolKindName(info.param));
                         });

}  // namespace
}  // namespace ndserve::engine
