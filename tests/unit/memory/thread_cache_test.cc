// The binned pool's per-thread caches: what they keep, and that Stats, Reclaim,
// memory pressure, thread exit and pool destruction all still see every block.
#include <latch>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "memory/binned_pool.h"
#include "memory/host_allocator.h"
#include "memory/pool.h"
#include "memory/thread_cache.h"
#include "tests/unit/memory/pool_test_util.h"

namespace ndserve {
namespace {

std::unique_ptr<Pool> Binned(PoolOptions options = {}) {
  return MakePool(PoolKind::kBinned, std::make_unique<HostAllocator>(), options);
}

Block MustAllocate(Pool& pool, std::size_t bytes) {
  absl::StatusOr<Block> b = pool.Allocate(bytes);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *b : Block{};
}

// Runs `body` on a new thread that then stays alive, idle, until the returned
// object's release() is called (or it is destroyed): the shape of a daemon worker
// waiting for its next request with blocks in its cache.
class IdleThread {
 public:
  explicit IdleThread(std::function<void()> body)
      : thread_([this, body = std::move(body)] {
          body();
          ran_.count_down();
          release_.wait();
        }) {
    ran_.wait();
  }
  ~IdleThread() { Release(); }
  void Release() {
    if (thread_.joinable()) {
      release_.count_down();
      thread_.join();
    }
  }

 private:
  std::latch ran_{1};
  std::latch release_{1};
  std::thread thread_;
};

TEST(ThreadCacheTest, SizeClassesMatchTheBins) {
  for (std::size_t bytes : {1, 255, 512, 513, 1000, 1024, 4097, 65536, 1 << 20}) {
    EXPECT_EQ(ThreadCache::ClassBytes(ThreadCache::ClassOf(bytes)),
              BinnedPool::RoundedSize(bytes))
        << bytes;
  }
  EXPECT_EQ(ThreadCache::ClassOf(ThreadCache::kMaxBytes), ThreadCache::kClasses - 1);
}

TEST(ThreadCacheTest, AFreedBlockComesBackToTheSameThread) {
  auto pool = Binned();
  Block a = MustAllocate(*pool, 3000);
  pool->Free(a);
  Block b = MustAllocate(*pool, 4000);  // same 4 KiB class
  EXPECT_EQ(b.ptr, a.ptr);
  EXPECT_EQ(b.size, 4096u);
  EXPECT_EQ(b.requested, 4000u);
  ExpectConsistent(*pool, {b});
  const PoolStats s = pool->Stats();
  EXPECT_EQ(s.device_allocs, 1u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.requested_bytes, 4000u);
  pool->Free(b);
  ExpectConsistent(*pool, {});
}

TEST(ThreadCacheTest, ReclaimEmptiesTheCachesOfIdleThreads) {
  auto pool = Binned();
  std::vector<Block> blocks;
  IdleThread worker([&] {
    for (std::size_t bytes : {512, 8192, 65536, 1 << 20}) blocks.push_back(MustAllocate(*pool, bytes));
    for (const Block& b : blocks) pool->Free(b);
  });
  // The worker is alive and holds all four blocks in its own cache.
  PoolStats s = pool->Stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, 512u + 8192 + 65536 + (1 << 20));
  EXPECT_EQ(s.outstanding_allocations, 0u);
  EXPECT_EQ(pool->Reclaim(), s.cached_bytes);
  s = pool->Stats();
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.device_frees, 4u);
  ExpectConsistent(*pool, {});
}

TEST(ThreadCacheTest, MemoryPressureTakesBlocksFromOtherThreadsCaches) {
  PoolOptions options;
  options.limit_bytes = 1 << 20;
  auto pool = Binned(options);
  IdleThread worker([&] { pool->Free(MustAllocate(*pool, 1 << 20)); });
  // The whole limit sits in the worker's cache; this thread's request of the same
  // class takes that block instead of failing.
  absl::StatusOr<Block> b = pool->Allocate(1 << 20);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(pool->Stats().device_allocs, 1u);
  // A different class needs the block to go back to the device first.
  pool->Free(*b);
  IdleThread worker2([&] { pool->Free(MustAllocate(*pool, 1 << 20)); });
  absl::StatusOr<Block> c = pool->Allocate(512 << 10);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(pool->Stats().reclaimed_bytes_pressure, 1u << 20);
  pool->Free(*c);
  EXPECT_EQ(pool->Stats().oom_count, 0u);
}

TEST(ThreadCacheTest, AnExitingThreadHandsItsCacheBack) {
  auto pool = Binned();
  std::thread([&] {
    Block a = MustAllocate(*pool, 2048);
    Block b = MustAllocate(*pool, 2048);
    pool->Free(a);
    pool->Free(b);
    Block c = MustAllocate(*pool, 2048);  // from the thread's cache
    pool->Free(c);
  }).join();
  PoolStats s = pool->Stats();
  EXPECT_EQ(s.alloc_count, 3u);
  EXPECT_EQ(s.free_count, 3u);
  EXPECT_EQ(s.cache_hits, 1u);
  ExpectConsistent(*pool, {});
  // Both blocks are in the shared list now: this thread gets them without the device.
  Block x = MustAllocate(*pool, 2048);
  Block y = MustAllocate(*pool, 2048);
  EXPECT_EQ(pool->Stats().device_allocs, 2u);
  pool->Free(x);
  pool->Free(y);
}

TEST(ThreadCacheTest, BlocksFreedOnAnotherThreadAreCountedExactly) {
  auto pool = Binned();
  std::vector<Block> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(MustAllocate(*pool, 700 + 100 * i));
  IdleThread freer([&] {
    for (const Block& b : blocks) pool->Free(b);
  });
  ExpectConsistent(*pool, {});
  PoolStats s = pool->Stats();
  EXPECT_EQ(s.alloc_count, 100u);
  EXPECT_EQ(s.free_count, 100u);
  EXPECT_EQ(s.peak_allocated_bytes, s.reserved_bytes);
}

TEST(ThreadCacheTest, ACacheKeepsNoMoreThanItsBudget) {
  PoolOptions options;
  options.thread_cache_bytes = 4096;
  auto pool = Binned(options);
  std::vector<Block> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(MustAllocate(*pool, 1024));
  IdleThread freer([&] {
    for (const Block& b : blocks) pool->Free(b);
  });
  // The freeing thread kept 4 KiB (four blocks); the other twelve are in the shared
  // list, so sixteen new blocks here cost exactly four device allocations.
  for (Block& b : blocks) b = MustAllocate(*pool, 1024);
  EXPECT_EQ(pool->Stats().device_allocs, 16u + 4u);
  for (const Block& b : blocks) pool->Free(b);
}

TEST(ThreadCacheTest, ACacheKeepsAtMostDepthBlocksPerClass) {
  auto pool = Binned();
  std::vector<Block> blocks;
  for (int i = 0; i < 3 * ThreadCache::kDepth; ++i) blocks.push_back(MustAllocate(*pool, 512));
  IdleThread freer([&] {
    for (const Block& b : blocks) pool->Free(b);
  });
  for (Block& b : blocks) b = MustAllocate(*pool, 512);
  EXPECT_EQ(pool->Stats().device_allocs,
            static_cast<std::uint64_t>(3 * ThreadCache::kDepth + ThreadCache::kDepth));
  for (const Block& b : blocks) pool->Free(b);
}

TEST(ThreadCacheTest, ZeroBudgetOrLeakTrackingTurnsThemOff) {
  for (PoolOptions options : {PoolOptions{.thread_cache_bytes = 0},
                              PoolOptions{.debug_level = 1}}) {
    auto pool = Binned(options);
    IdleThread worker([&] { pool->Free(MustAllocate(*pool, 4096)); });
    // Nothing stayed with the worker: the block is in the shared list.
    Block b = MustAllocate(*pool, 4096);
    EXPECT_EQ(pool->Stats().device_allocs, 1u);
    pool->Free(b);
  }
}

TEST(ThreadCacheTest, FreeAllFillsTheCacheThenTheSharedList) {
  PoolOptions options;
  options.thread_cache_bytes = 8192;
  auto pool = Binned(options);
  std::vector<Block> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(MustAllocate(*pool, 4096));
  pool->FreeAll(blocks);
  ExpectConsistent(*pool, {});
  EXPECT_EQ(pool->Stats().free_count, 6u);
  IdleThread other([&] {
    // Two blocks stayed in the main thread's cache; four are shared.
    std::vector<Block> again;
    for (int i = 0; i < 6; ++i) again.push_back(MustAllocate(*pool, 4096));
    EXPECT_EQ(pool->Stats().device_allocs, 6u + 2u);
    pool->FreeAll(again);
  });
  ExpectConsistent(*pool, {});
}

TEST(ThreadCacheTest, APoolDestroyedWhileItsThreadsLiveLeavesThemSafe) {
  std::unique_ptr<Pool> pool = Binned();
  std::latch used{1}, destroyed{1}, reused{1};
  std::thread worker([&] {
    pool->Free(MustAllocate(*pool, 4096));
    used.count_down();
    destroyed.wait();
    // A new pool may get the old one's slot: this thread must not see its old cache.
    pool->Free(MustAllocate(*pool, 4096));
    Block b = MustAllocate(*pool, 4096);
    EXPECT_EQ(pool->Stats().device_allocs, 1u);
    pool->Free(b);
    reused.count_down();
  });
  used.wait();
  EXPECT_EQ(pool->Stats().cached_bytes, 4096u);
  pool = Binned();  // the old pool takes its block back from the live worker
  destroyed.count_down();
  reused.wait();
  worker.join();  // exits after its first pool is gone
  ExpectConsistent(*pool, {});
  EXPECT_EQ(pool->Reclaim(), 4096u);
}

TEST(ThreadCacheTest, PoolsBeyondTheSlotTableWorkWithoutCaches) {
  std::vector<std::unique_ptr<Pool>> pools;
  for (int i = 0; i < kThreadCacheSlots + 4; ++i) pools.push_back(Binned());
  for (auto& pool : pools) {
    Block a = MustAllocate(*pool, 1000);
    pool->Free(a);
    Block b = MustAllocate(*pool, 1000);
    EXPECT_EQ(b.ptr, a.ptr);
    pool->Free(b);
    ExpectConsistent(*pool, {});
  }
}

TEST(ThreadCacheTest, ManyThreadsStayExactAndReclaimAll) {
  auto pool = Binned();
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::latch done{kThreads}, release{1};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Block> live;
      for (int i = 0; i < 20000; ++i) {
        const std::size_t bytes = 512u << ((i * 7 + t) % 12);
        if (live.size() < 16) {
          Block b = MustAllocate(*pool, bytes);
          static_cast<unsigned char*>(b.ptr)[0] = static_cast<unsigned char>(t);
          live.push_back(b);
        } else {
          Block b = live[i % live.size()];
          ASSERT_EQ(static_cast<unsigned char*>(b.ptr)[0], static_cast<unsigned char>(t));
          pool->Free(b);
          live[i % live.size()] = live.back();
          live.pop_back();
        }
        if (i % 4096 == 0) pool->Stats();  // readers lock every cache meanwhile
      }
      pool->FreeAll(live);
      done.count_down();
      release.wait();
    });
  }
  done.wait();
  ExpectConsistent(*pool, {});
  pool->Reclaim();
  EXPECT_EQ(pool->Stats().reserved_bytes, 0u);
  release.count_down();
  for (auto& t : threads) t.join();
  ExpectConsistent(*pool, {});
  EXPECT_EQ(pool->Stats().reserved_bytes, 0u);
}

}  // namespace
}  // namespace ndserve
