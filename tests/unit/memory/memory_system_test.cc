#include "memory/memory_system.h"

#include <memory>

#include "gtest/gtest.h"
#include "tests/unit/memory/nd_manager_test_util.h"

namespace ndserve {
namespace {

using testing_util::IsFreedError;
using testing_util::Must;

MemoryConfig LimitedConfig(std::uint64_t bytes) {
  MemoryConfig config;
  config.limit.unlimited = false;
  config.limit.bytes = bytes;
  return config;
}

TEST(MemorySystemTest, PoolsAreMadeOncePerDeviceFromTheConfig) {
  MemoryConfig config = LimitedConfig(8 << 20);
  config.pool = PoolKind::kSplit;
  MemorySystem memory(config);
  EXPECT_EQ(memory.config().pool, PoolKind::kSplit);
  EXPECT_TRUE(memory.AllPools().empty());  // made on first use
  Pool* cpu = Must(memory.GetPool(Device::Cpu()));
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(Must(memory.GetPool(Device::Cpu())), cpu);
  EXPECT_EQ(cpu->kind(), PoolKind::kSplit);
  EXPECT_EQ(cpu->Stats().limit_bytes, 8u << 20);
  EXPECT_EQ(memory.AllPools(), std::vector<Pool*>{cpu});
  EXPECT_EQ(Must(memory.pools().Get(Device::Cpu())), cpu);
}

TEST(MemorySystemTest, DebugLevelReachesThePools) {
  MemoryConfig config;
  config.debug_level = 2;
  MemorySystem memory(config);
  EXPECT_EQ(memory.debug_level(), 2);
  EXPECT_EQ(Must(memory.GetPool(Device::Cpu()))->debug_level(), 2);
}

TEST(MemorySystemTest, AbsentCudaDeviceIsAnError) {
  MemorySystem memory;
  absl::StatusOr<Pool*> cuda = memory.GetPool(Device::Cuda(63));
  EXPECT_TRUE(absl::IsFailedPrecondition(cuda.status())) << cuda.status();
  absl::StatusOr<std::shared_ptr<NDManager>> root = memory.SystemManager(Device::Cuda(63));
  EXPECT_TRUE(absl::IsFailedPrecondition(root.status())) << root.status();
  EXPECT_TRUE(memory.AllSystemManagers().empty());
}

TEST(MemorySystemTest, SystemManagerIsOnePerDeviceAndMemorySystem) {
  MemorySystem first;
  MemorySystem second;
  std::shared_ptr<NDManager> a = Must(first.SystemManager(Device::Cpu()));
  std::shared_ptr<NDManager> b = Must(second.SystemManager(Device::Cpu()));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(Must(first.SystemManager(Device::Cpu())), a);
  EXPECT_NE(a, b);
  EXPECT_EQ(a->pool(), Must(first.GetPool(Device::Cpu())));
  EXPECT_EQ(b->pool(), Must(second.GetPool(Device::Cpu())));
  EXPECT_NE(a->pool(), b->pool());
  EXPECT_EQ(first.AllSystemManagers(), std::vector<std::shared_ptr<NDManager>>{a});
  // Base managers hang under their own memory system's root.
  std::shared_ptr<NDManager> model =
      Must(second.NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "m"));
  EXPECT_EQ(model->parent(), b);
  EXPECT_EQ(a->child_count(), 0u);
  EXPECT_TRUE(model->Close().ok());
}

// Two memory systems share no pool, no limit and no counter.
TEST(MemorySystemTest, TwoMemorySystemsAreIndependent) {
  MemorySystem tight(LimitedConfig(1 << 20));
  MemorySystem roomy;
  std::shared_ptr<NDManager> small =
      Must(tight.NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "small"));
  std::shared_ptr<NDManager> big =
      Must(roomy.NewBaseManager(Device::Cpu(), ManagerLevel::kModel, "big"));

  absl::Status oom = small->Create({1 << 20}, DType::kFp32).status();  // 4 MiB > 1 MiB
  EXPECT_TRUE(absl::IsResourceExhausted(oom)) << oom;
  NDArray x = Must(big->Create({1 << 20}, DType::kFp32));
  EXPECT_EQ(Must(roomy.GetPool(Device::Cpu()))->Stats().allocated_bytes, 4u << 20);
  EXPECT_EQ(Must(tight.GetPool(Device::Cpu()))->Stats().allocated_bytes, 0u);
  EXPECT_EQ(Must(tight.GetPool(Device::Cpu()))->Stats().oom_count, 1u);
  EXPECT_EQ(Must(roomy.GetPool(Device::Cpu()))->Stats().oom_count, 0u);

  small->Cap();
  EXPECT_FALSE(small->Create({1}, DType::kFp32).ok());
  EXPECT_EQ(tight.LevelCounts()[ManagerLevel::kModel].cap_violations, 1);
  EXPECT_EQ(roomy.LevelCounts()[ManagerLevel::kModel].cap_violations, 0);
  EXPECT_EQ(roomy.LevelCounts()[ManagerLevel::kModel].attached_resources, 1);
  EXPECT_EQ(tight.LevelCounts()[ManagerLevel::kModel].attached_resources, 0);
  EXPECT_NE(roomy.DebugDumpAll().find("big (uid="), std::string::npos);
  EXPECT_EQ(roomy.DebugDumpAll().find("small"), std::string::npos);
  ASSERT_EQ(tight.DebugInfoAll().size(), 1u);
  EXPECT_EQ(tight.DebugInfoAll()[0].children.at(0).name, "small");
  EXPECT_TRUE(small->Close().ok());
  EXPECT_TRUE(big->Close().ok());
}

TEST(MemorySystemTest, TheSystemManagerRefusesCloseButTheMemorySystemClosesItsTrees) {
  std::shared_ptr<NDManager> root;
  std::shared_ptr<NDManager> model;
  NDArray param;
  NDArray loose;
  {
    MemorySystem memory;
    root = Must(memory.SystemManager(Device::Cpu()));
    absl::Status refused = root->Close();
    EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
    EXPECT_FALSE(root->closed());
    model = Must(memory.NewBaseManager(Device::Cpu(), ManagerLevel::kModel));
    param = Must(model->Create({16}, DType::kFp32));
    loose = Must(root->Create({16}, DType::kFp32));
    EXPECT_TRUE(param.valid());
  }
  // The memory system closed every manager (and freed every array) before its pools
  // died; the handles that outlived it report freed memory instead of touching them.
  EXPECT_TRUE(root->closed());
  EXPECT_TRUE(model->closed());
  EXPECT_FALSE(param.valid());
  EXPECT_FALSE(loose.valid());
  EXPECT_TRUE(IsFreedError(param.ToVector<float>().status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(model->NewSubManager().status()));
}

}  // namespace
}  // namespace ndserve
