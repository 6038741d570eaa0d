// PinnedStaging (docs/design.md §4.3) over a host pool standing in for a GPU's pinned
// pool: blocks are usable host memory, and Release or destruction hands every one back.
#include "engine/pinned_staging.h"

#include <cstring>

#include "gtest/gtest.h"
#include "memory/memory_system.h"

namespace ndserve::engine {
namespace {

TEST(PinnedStagingTest, BlocksGoBackOnReleaseAndDestruction) {
  MemorySystem memory;
  absl::StatusOr<Pool*> pool = memory.GetPool(Device::Cpu());
  ASSERT_TRUE(pool.ok()) << pool.status();
  {
    PinnedStaging staging(*pool);
    absl::StatusOr<void*> a = staging.Take(1000);
    absl::StatusOr<void*> b = staging.Take(64);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_NE(*a, nullptr);
    ASSERT_NE(*a, *b);
    std::memset(*a, 7, 1000);  // host-writable, like cudaHostAlloc memory
    EXPECT_GE((*pool)->Stats().allocated_bytes, 1064u);
    staging.Release();
    EXPECT_EQ((*pool)->Stats().allocated_bytes, 0u);
    ASSERT_TRUE(staging.Take(10).ok());  // usable again after Release
    EXPECT_GT((*pool)->Stats().allocated_bytes, 0u);
  }
  EXPECT_EQ((*pool)->Stats().allocated_bytes, 0u) << "the destructor releases";
}

TEST(PinnedStagingTest, ZeroBytesTakesNothing) {
  MemorySystem memory;
  absl::StatusOr<Pool*> pool = memory.GetPool(Device::Cpu());
  ASSERT_TRUE(pool.ok()) << pool.status();
  PinnedStaging staging(*pool);
  absl::StatusOr<void*> none = staging.Take(0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  EXPECT_EQ((*pool)->Stats().allocated_bytes, 0u);
}

TEST(PinnedStagingTest, PastThePoolLimitIsResourceExhausted) {
  MemoryConfig config;
  config.limit.unlimited = false;
  config.limit.bytes = 1 << 20;
  MemorySystem memory(config);
  absl::StatusOr<Pool*> pool = memory.GetPool(Device::Cpu());
  ASSERT_TRUE(pool.ok()) << pool.status();
  PinnedStaging staging(*pool);
  EXPECT_EQ(staging.Take(size_t{4} << 20).status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace ndserve::engine
