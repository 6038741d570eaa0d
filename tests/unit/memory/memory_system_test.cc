#include "memory/memory_system.h"

#include "gtest/gtest.h"

namespace ndserve {
namespace {

TEST(MemorySystemTest, PoolsAreBuiltOnceAndConfigurationIsFixedAfterwards) {
  absl::StatusOr<DevicePools*> pools = TryGlobalPools();
  ASSERT_TRUE(pools.ok()) << pools.status();
  EXPECT_EQ(*pools, &GlobalPools());
  absl::StatusOr<Pool*> cpu = GlobalPool(Device::Cpu());
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(*cpu, *(*pools)->Get(Device::Cpu()));
  EXPECT_EQ((*cpu)->kind(), (*pools)->config().pool);

  // Same configuration again: fine. Another one, once built: refused.
  EXPECT_TRUE(ConfigureMemory((*pools)->config()).ok());
  MemoryConfig other = (*pools)->config();
  other.pool = other.pool == PoolKind::kNone ? PoolKind::kBinned : PoolKind::kNone;
  absl::Status status = ConfigureMemory(other);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
}

TEST(MemorySystemTest, AbsentCudaDeviceIsAnError) {
  absl::StatusOr<Pool*> cuda = GlobalPool(Device::Cuda(63));
  EXPECT_TRUE(absl::IsFailedPrecondition(cuda.status())) << cuda.status();
}

}  // namespace
}  // namespace ndserve
