// Binned-specific behaviour: power-of-two rounding and the >128 MiB bypass.
#include "memory/binned_pool.h"

#include "gtest/gtest.h"
#include "memory/host_allocator.h"

namespace ndserve {
namespace {

std::unique_ptr<Pool> MakeBinned(HostAllocator** host = nullptr) {
  auto allocator = std::make_unique<HostAllocator>();
  if (host) *host = allocator.get();
  return MakePool(PoolKind::kBinned, std::move(allocator));
}

TEST(BinnedPoolTest, RoundsUpToPowersOfTwoWithA512ByteFloor) {
  EXPECT_EQ(BinnedPool::RoundedSize(1), 512u);
  EXPECT_EQ(BinnedPool::RoundedSize(512), 512u);
  EXPECT_EQ(BinnedPool::RoundedSize(513), 1024u);
  EXPECT_EQ(BinnedPool::RoundedSize(3000), 4096u);
  EXPECT_EQ(BinnedPool::RoundedSize((1u << 20) + 1), 2u << 20);
  EXPECT_EQ(BinnedPool::RoundedSize(128u << 20), 128u << 20);
  // Past 128 MiB: 256-byte rounding only.
  EXPECT_EQ(BinnedPool::RoundedSize((128u << 20) + 1), (128u << 20) + 256);

  auto pool = MakeBinned();
  absl::StatusOr<Block> b = pool->Allocate(3000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->size, 4096u);
  EXPECT_EQ(pool->Stats().allocated_bytes, 4096u);
  EXPECT_EQ(pool->Stats().requested_bytes, 3000u);
  pool->Free(*b);
}

TEST(BinnedPoolTest, SameBinIsReusedOtherBinsAreNot) {
  auto pool = MakeBinned();
  absl::StatusOr<Block> a = pool->Allocate(3000);  // 4 KiB bin
  ASSERT_TRUE(a.ok());
  pool->Free(*a);
  absl::StatusOr<Block> b = pool->Allocate(2100);  // also the 4 KiB bin
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->ptr, a->ptr);
  absl::StatusOr<Block> c = pool->Allocate(5000);  // 8 KiB bin: a new block
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->ptr, a->ptr);
  const PoolStats s = pool->Stats();
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.cache_misses, 2u);
  pool->Free(*b);
  pool->Free(*c);
  EXPECT_EQ(pool->Stats().cached_bytes, 4096u + 8192u);
}

TEST(BinnedPoolTest, HugeRequestsBypassTheBins) {
  HostAllocator* host = nullptr;
  auto pool = MakeBinned(&host);
  constexpr std::size_t kHuge = (128u << 20) + 1000;
  absl::StatusOr<Block> b = pool->Allocate(kHuge);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->size, (128u << 20) + 1024);
  // Counted like any allocation...
  PoolStats s = pool->Stats();
  EXPECT_EQ(s.allocated_bytes, b->size);
  EXPECT_EQ(s.reserved_bytes, b->size);
  EXPECT_EQ(s.outstanding_allocations, 1u);
  // ...but freed straight back to the device, never cached.
  pool->Free(*b);
  s = pool->Stats();
  EXPECT_EQ(s.cached_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.device_frees, 1u);
  EXPECT_EQ(host->in_use(), 0u);
}

TEST(BinnedPoolTest, ReclaimTakesTheLargestBinsFirst) {
  HostAllocator* host = nullptr;
  auto pool = MakeBinned(&host);
  std::vector<Block> blocks;
  for (std::size_t bytes : {1000ul, 1000ul, 1ul << 20, 4ul << 20}) {
    absl::StatusOr<Block> b = pool->Allocate(bytes);
    ASSERT_TRUE(b.ok());
    blocks.push_back(*b);
  }
  for (const Block& b : blocks) pool->Free(b);
  EXPECT_EQ(pool->Reclaim(1), 4u << 20);  // the 4 MiB block alone meets the target
  EXPECT_EQ(pool->Reclaim(1u << 19), 1u << 20);  // then 1 MiB; small bins go last
  EXPECT_EQ(pool->Stats().cached_bytes, 2048u);
  EXPECT_EQ(pool->Reclaim(), 2048u);
  EXPECT_EQ(host->in_use(), 0u);
}

}  // namespace
}  // namespace ndserve
