// A ThreadCache on its own, without a pool: what it keeps, what it refuses, and that
// its owner thread never waits for a reader.
#include <vector>

#include "gtest/gtest.h"
#include "memory/thread_cache.h"

namespace ndserve {
namespace {

Block FreedBlock(std::uintptr_t address, std::size_t requested, std::size_t size) {
  return Block{reinterpret_cast<void*>(address), requested, size, nullptr};
}

TEST(ThreadCacheUnitTest, KeepsFreedBlocksPerClassAndCountsThem) {
  ThreadCache cache(nullptr, 1 << 20);
  ASSERT_TRUE(cache.TryPut(FreedBlock(0x10000, 3000, 4096)));
  EXPECT_TRUE(cache.TryTake(8000).empty());  // 8 KiB class: nothing held
  const Block b = cache.TryTake(2049);       // the 4 KiB class
  EXPECT_EQ(b.ptr, reinterpret_cast<void*>(0x10000));
  EXPECT_EQ(b.size, 4096u);
  EXPECT_EQ(b.requested, 2049u);
  SpinLockHolder lock(&cache.mu);
  const AllocationCounts c = cache.CountsLocked();
  EXPECT_EQ(c.allocated, 0u);  // one block out, one in
  EXPECT_EQ(c.requested, std::uint64_t{2049} - 3000);
  EXPECT_EQ(c.alloc_count, 1u);
  EXPECT_EQ(c.free_count, 1u);
}

TEST(ThreadCacheUnitTest, RefusesBlocksPastItsBudgetDepthOrSize) {
  ThreadCache cache(nullptr, 3 * 1024);
  EXPECT_TRUE(cache.TryPut(FreedBlock(0x1000, 1024, 1024)));
  EXPECT_TRUE(cache.TryPut(FreedBlock(0x2000, 2048, 2048)));
  EXPECT_FALSE(cache.TryPut(FreedBlock(0x3000, 512, 512)));  // 3.5 KiB > budget
  ThreadCache deep(nullptr, 1 << 30);
  for (int i = 0; i < ThreadCache::kDepth; ++i) {
    EXPECT_TRUE(deep.TryPut(FreedBlock(0x1000 * (i + 1), 512, 512)));
  }
  EXPECT_FALSE(deep.TryPut(FreedBlock(0x100000, 512, 512)));
  EXPECT_FALSE(deep.TryPut(FreedBlock(0x200000, 2 << 20, 2 << 20)));  // > kMaxBytes
}

TEST(ThreadCacheUnitTest, TheOwnerSkipsTheCacheWhileAReaderHoldsIt) {
  ThreadCache cache(nullptr, 1 << 20);
  ASSERT_TRUE(cache.TryPut(FreedBlock(0x1000, 512, 512)));
  cache.mu.Lock();  // a reader (Stats, Reclaim) in the middle of its walk
  EXPECT_TRUE(cache.TryTake(512).empty());
  EXPECT_FALSE(cache.TryPut(FreedBlock(0x2000, 512, 512)));
  std::vector<Block> drained;
  cache.DrainLocked(&drained);
  cache.mu.Unlock();
  ASSERT_EQ(drained.size(), 1u);
  EXPECT_EQ(drained[0].ptr, reinterpret_cast<void*>(0x1000));
  EXPECT_EQ(drained[0].size, 512u);
  EXPECT_TRUE(cache.TryTake(512).empty());  // drained
}

}  // namespace
}  // namespace ndserve
