// At debug level 2 a block that is never freed shows up in MemoryStatus() with the
// stack of the function that allocated it.
#include <string>

#include "gtest/gtest.h"
#include "memory/host_allocator.h"
#include "memory/pool.h"

namespace ndserve {
namespace {

// Not inlined and not static, so it keeps its own frame and its name is in the symbol
// table the symbolizer reads.
[[gnu::noinline]] Block LeakyModelLoaderForTest(Pool& pool) {
  absl::StatusOr<Block> b = pool.Allocate(8192, "model/leaky");
  EXPECT_TRUE(b.ok());
  asm volatile("" ::: "memory");  // keep the call from becoming a tail call
  return *b;
}

std::unique_ptr<Pool> PoolAtLevel(int level) {
  PoolOptions options;
  options.debug_level = level;
  return MakePool(PoolKind::kBinned, std::make_unique<HostAllocator>(), options);
}

TEST(LeakTrackingTest, Level2ReportsOwnerAndAllocatingFunction) {
  auto pool = PoolAtLevel(2);
  Block leaked = LeakyModelLoaderForTest(*pool);
  absl::StatusOr<Block> freed = pool->Allocate(100, "ctx/1");
  ASSERT_TRUE(freed.ok());
  pool->Free(*freed);

  std::vector<OutstandingAllocation> outstanding = pool->Outstanding();
  ASSERT_EQ(outstanding.size(), 1u);
  EXPECT_EQ(outstanding[0].address, reinterpret_cast<std::uintptr_t>(leaked.ptr));
  EXPECT_EQ(outstanding[0].bytes, 8192u);
  EXPECT_EQ(outstanding[0].owner, "model/leaky");
  EXPECT_NE(outstanding[0].stack_trace.find("LeakyModelLoaderForTest"), std::string::npos)
      << outstanding[0].stack_trace;

  const std::string status = pool->MemoryStatus();
  EXPECT_NE(status.find("Outstanding allocation of 8.000 KiB"), std::string::npos) << status;
  EXPECT_NE(status.find("(manager model/leaky)"), std::string::npos) << status;
  EXPECT_NE(status.find("LeakyModelLoaderForTest"), std::string::npos) << status;
  pool->Free(leaked);
  EXPECT_TRUE(pool->Outstanding().empty());
}

TEST(LeakTrackingTest, Level1ListsOwnersWithoutStacks) {
  auto pool = PoolAtLevel(1);
  absl::StatusOr<Block> b = pool->Allocate(1000, "predictor/2");
  ASSERT_TRUE(b.ok());
  std::vector<OutstandingAllocation> outstanding = pool->Outstanding();
  ASSERT_EQ(outstanding.size(), 1u);
  EXPECT_EQ(outstanding[0].owner, "predictor/2");
  EXPECT_TRUE(outstanding[0].stack_trace.empty());
  pool->Free(*b);
}

TEST(LeakTrackingTest, Level0OnlyCounts) {
  auto pool = PoolAtLevel(0);
  absl::StatusOr<Block> b = pool->Allocate(1000, "predictor/2");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(pool->Outstanding().empty());
  EXPECT_EQ(pool->Stats().outstanding_allocations, 1u);
  pool->Free(*b);
}

}  // namespace
}  // namespace ndserve
