// SplitPool's own behaviour: size classes, best fit, splitting, coalescing and which
// segments Reclaim may give back. The contract shared by every pool is in
// pool_conformance_test.cc.
#include "memory/split_pool.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "base/logging.h"
#include "gtest/gtest.h"
#include "memory/host_allocator.h"
#include "tests/unit/memory/pool_test_util.h"

namespace ndserve {
namespace {

constexpr std::size_t kKiB = SplitPool::kKiB;
constexpr std::size_t kMiB = SplitPool::kMiB;

char* At(const Block& b) { return static_cast<char*>(b.ptr); }

class SplitPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Reclaim logs at INFO and OOMs at WARNING; several tests provoke both on purpose.
    logging::SetMinSeverity(logging::Severity::kError);
    Make();
  }
  void TearDown() override {
    pool_.reset();
    logging::SetMinSeverity(logging::Severity::kInfo);
  }

  // A fresh pool over a host "device" of `capacity` bytes (the pages are never touched,
  // so a large capacity costs nothing).
  void Make(std::uint64_t limit = kNoLimit, std::uint64_t capacity = std::uint64_t{4} << 30) {
    pool_.reset();
    auto allocator = std::make_unique<HostAllocator>(capacity);
    device_ = allocator.get();
    PoolOptions options;
    options.limit_bytes = limit;
    pool_ = std::make_unique<SplitPool>(std::move(allocator), options);
  }

  Block Alloc(std::size_t bytes) {
    absl::StatusOr<Block> b = pool_->Allocate(bytes);
    EXPECT_TRUE(b.ok()) << bytes << ": " << b.status();
    if (!b.ok()) return Block{};
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->ptr) % DeviceAllocator::kAlignment, 0u);
    EXPECT_EQ(b->requested, bytes);
    return *b;
  }

  std::unique_ptr<SplitPool> pool_;
  HostAllocator* device_ = nullptr;
};

TEST_F(SplitPoolTest, RoundsPerSizeClass) {
  EXPECT_EQ(SplitPool::RoundedSize(1), 512u);
  EXPECT_EQ(SplitPool::RoundedSize(512), 512u);
  EXPECT_EQ(SplitPool::RoundedSize(513), 1024u);
  EXPECT_EQ(SplitPool::RoundedSize(1 * kMiB), 1 * kMiB);                   // largest small
  EXPECT_EQ(SplitPool::RoundedSize(1 * kMiB + 1), 1 * kMiB + 128 * kKiB);  // smallest large
  EXPECT_EQ(SplitPool::RoundedSize(32 * kMiB), 32 * kMiB);                 // largest large
  EXPECT_EQ(SplitPool::RoundedSize(32 * kMiB + 1), 33 * kMiB);             // smallest huge
  EXPECT_EQ(SplitPool::RoundedSize(std::numeric_limits<std::size_t>::max() - 3),
            std::numeric_limits<std::size_t>::max());  // saturates, never wraps

  // The blocks handed out have exactly the rounded size when the rest of the segment
  // can be split off, and each class takes its own segment size from the device.
  std::vector<Block> live;
  live.push_back(Alloc(1000));
  EXPECT_EQ(live.back().size, 1024u);
  EXPECT_EQ(device_->in_use(), 2 * kMiB);
  live.push_back(Alloc(1 * kMiB + 1));
  EXPECT_EQ(live.back().size, 1 * kMiB + 128 * kKiB);
  EXPECT_EQ(device_->in_use(), 22 * kMiB);
  live.push_back(Alloc(20 * kMiB + 1));  // too big for a shared 20 MiB large segment
  EXPECT_EQ(live.back().size, 20 * kMiB + 128 * kKiB);
  EXPECT_EQ(device_->in_use(), 42 * kMiB + 128 * kKiB);
  live.push_back(Alloc(32 * kMiB + 1));
  EXPECT_EQ(live.back().size, 33 * kMiB);
  EXPECT_EQ(device_->in_use(), 75 * kMiB + 128 * kKiB);
  EXPECT_EQ(pool_->Stats().device_allocs, 4u);
  EXPECT_EQ(pool_->Stats().reserved_bytes, device_->in_use());
  ExpectConsistent(*pool_, live);
  for (const Block& b : live) pool_->Free(b);
}

TEST_F(SplitPoolTest, SmallAllocationsAreSplitFromOneSegment) {
  const Block a = Alloc(1000);
  const Block b = Alloc(3000);
  EXPECT_EQ(At(b), At(a) + 1024);  // adjacent: b was cut from the rest of a's segment
  EXPECT_EQ(b.size, 3072u);
  const PoolStats s = pool_->Stats();
  EXPECT_EQ(s.device_allocs, 1u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(device_->in_use(), 2 * kMiB);
  EXPECT_EQ(s.inactive_split_bytes, 2 * kMiB - 1024 - 3072);
  ExpectConsistent(*pool_, {a, b});
  pool_->Free(a);
  pool_->Free(b);
}

TEST_F(SplitPoolTest, LargeBlocksSplitOnlyWhileTheRestStaysLarge) {
  const Block a = Alloc(2 * kMiB);
  const Block b = Alloc(2 * kMiB);
  EXPECT_EQ(At(b), At(a) + 2 * kMiB);
  EXPECT_EQ(pool_->Stats().device_allocs, 1u);
  // 16 MiB left: taking 14.5 MiB leaves 1.5 MiB, still a large size, so it splits.
  const Block c = Alloc(14 * kMiB + 512 * kKiB);
  EXPECT_EQ(c.size, 14 * kMiB + 512 * kKiB);
  // 1.5 MiB left: taking 1.125 MiB would strand 384 KiB, so the caller gets all of it.
  const Block d = Alloc(1 * kMiB + 1);
  EXPECT_EQ(At(d), At(c) + c.size);
  EXPECT_EQ(d.size, 1 * kMiB + 512 * kKiB);
  EXPECT_EQ(pool_->Stats().device_allocs, 1u);
  EXPECT_EQ(pool_->Stats().inactive_split_bytes, 0u);  // the segment is full

  // A 19.5 MiB request gets a fresh 20 MiB segment whole: 512 KiB cannot be split off.
  const Block e = Alloc(19 * kMiB + 512 * kKiB);
  EXPECT_EQ(e.size, 20 * kMiB);
  ExpectConsistent(*pool_, {a, b, c, d, e});
  for (const Block& x : {a, b, c, d, e}) pool_->Free(x);
  EXPECT_EQ(pool_->Reclaim(), 40 * kMiB);
}

TEST_F(SplitPoolTest, BestFitTakesTheSmallestHoleThatFits) {
  // Holes of 8, 2 and 4 KiB (in address order), kept apart by live separators, plus
  // the big free tail of the segment.
  const Block h8 = Alloc(8 * kKiB);
  const Block s1 = Alloc(512);
  const Block h2 = Alloc(2 * kKiB);
  const Block s2 = Alloc(512);
  const Block h4 = Alloc(4 * kKiB);
  const Block s3 = Alloc(512);
  pool_->Free(h8);
  pool_->Free(h2);
  pool_->Free(h4);

  const Block x3 = Alloc(3 * kKiB);  // 4 KiB hole; the 1 KiB rest stays behind
  EXPECT_EQ(At(x3), At(h4));
  EXPECT_EQ(x3.size, 3 * kKiB);
  const Block x2 = Alloc(2 * kKiB);  // exact fit
  EXPECT_EQ(At(x2), At(h2));
  const Block x1 = Alloc(1 * kKiB);  // the 1 KiB rest of the 4 KiB hole
  EXPECT_EQ(At(x1), At(h4) + 3 * kKiB);
  const Block x5 = Alloc(5 * kKiB);  // 8 KiB hole, not the tail
  EXPECT_EQ(At(x5), At(h8));
  const Block x16 = Alloc(16 * kKiB);  // only the tail fits
  EXPECT_EQ(At(x16), At(s3) + 512);
  EXPECT_EQ(pool_->Stats().device_allocs, 1u);

  const std::vector<Block> live = {s1, s2, s3, x3, x2, x1, x5, x16};
  ExpectConsistent(*pool_, live);
  for (const Block& b : live) pool_->Free(b);
}

TEST_F(SplitPoolTest, EqualHolesAreTakenLowestAddressFirst) {
  const Block a = Alloc(4 * kKiB);
  const Block s1 = Alloc(512);
  const Block b = Alloc(4 * kKiB);
  const Block s2 = Alloc(512);
  pool_->Free(b);
  pool_->Free(a);
  const Block first = Alloc(4 * kKiB);
  const Block second = Alloc(4 * kKiB);
  EXPECT_EQ(At(first), At(a));
  EXPECT_EQ(At(second), At(b));
  for (const Block& x : {s1, s2, first, second}) pool_->Free(x);
}

TEST_F(SplitPoolTest, FreedBlocksCoalesceIntoTheWholeSegment) {
  // Six blocks that tile one 2 MiB segment exactly.
  const std::size_t sizes[] = {512 * kKiB, 256 * kKiB, 1 * kMiB, 128 * kKiB, 64 * kKiB, 64 * kKiB};
  std::vector<Block> blocks;
  for (std::size_t bytes : sizes) blocks.push_back(Alloc(bytes));
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    EXPECT_EQ(At(blocks[i]), At(blocks[i - 1]) + blocks[i - 1].size);
  }
  EXPECT_EQ(pool_->Stats().device_allocs, 1u);
  EXPECT_EQ(pool_->Stats().inactive_split_bytes, 0u);

  // Scrambled order: merges happen to the left, to the right and on both sides.
  std::uint64_t live = 2 * kMiB;
  std::vector<Block> remaining = blocks;
  for (int i : {2, 0, 4, 1, 5, 3}) {
    pool_->Free(blocks[i]);
    live -= blocks[i].size;
    remaining.erase(std::find_if(remaining.begin(), remaining.end(),
                                 [&](const Block& b) { return b.ptr == blocks[i].ptr; }));
    ExpectConsistent(*pool_, remaining);
    EXPECT_EQ(pool_->Stats().inactive_split_bytes, live == 0 ? 0 : 2 * kMiB - live) << i;
  }

  PoolStats s = pool_->Stats();
  EXPECT_EQ(s.inactive_split_bytes, 0u);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB);
  // Coalesced: one 1 MiB block and another 1 MiB block fit without a new segment.
  const Block big1 = Alloc(1 * kMiB);
  const Block big2 = Alloc(1 * kMiB);
  EXPECT_EQ(At(big1), At(blocks[0]));
  EXPECT_EQ(pool_->Stats().device_allocs, 1u);
  pool_->Free(big2);
  pool_->Free(big1);

  EXPECT_EQ(pool_->Reclaim(), 2 * kMiB);
  s = pool_->Stats();
  EXPECT_EQ(s.device_frees, 1u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.reclaimed_bytes_admin, 2 * kMiB);
  EXPECT_EQ(device_->in_use(), 0u);
}

TEST_F(SplitPoolTest, SegmentWithALiveBlockIsNotReclaimed) {
  const Block a = Alloc(4 * kKiB);
  const Block b = Alloc(4 * kKiB);
  pool_->Free(b);
  PoolStats s = pool_->Stats();
  EXPECT_EQ(s.inactive_split_bytes, 2 * kMiB - 4 * kKiB);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB - 4 * kKiB);

  EXPECT_EQ(pool_->Reclaim(), 0u);
  s = pool_->Stats();
  EXPECT_EQ(s.device_frees, 0u);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(device_->in_use(), 2 * kMiB);

  pool_->Free(a);
  EXPECT_EQ(pool_->Stats().inactive_split_bytes, 0u);
  EXPECT_EQ(pool_->Reclaim(), 2 * kMiB);
  s = pool_->Stats();
  EXPECT_EQ(s.device_frees, 1u);
  EXPECT_EQ(device_->in_use(), 0u);
}

TEST_F(SplitPoolTest, ReclaimGivesBackWhollyFreeSegmentsLargestFirst) {
  const Block small = Alloc(1 * kKiB);
  const Block large = Alloc(2 * kMiB);
  const Block huge = Alloc(64 * kMiB);
  const Block pinned = Alloc(40 * kMiB);  // stays live: its segment is never a candidate
  for (const Block& b : {small, large, huge}) pool_->Free(b);
  EXPECT_EQ(device_->in_use(), 126 * kMiB);

  EXPECT_EQ(pool_->Reclaim(1), 64 * kMiB);  // one segment reaches the target
  EXPECT_EQ(pool_->Stats().device_frees, 1u);
  EXPECT_EQ(device_->in_use(), 62 * kMiB);
  EXPECT_EQ(pool_->Reclaim(20 * kMiB), 20 * kMiB);
  EXPECT_EQ(device_->in_use(), 42 * kMiB);
  EXPECT_EQ(pool_->Reclaim(), 2 * kMiB);
  EXPECT_EQ(pool_->Reclaim(), 0u);
  const PoolStats s = pool_->Stats();
  EXPECT_EQ(s.device_frees, 3u);
  EXPECT_EQ(s.reclaimed_bytes_admin, 86 * kMiB);
  EXPECT_EQ(device_->in_use(), 40 * kMiB);
  ExpectConsistent(*pool_, {pinned});
  pool_->Free(pinned);
}

TEST_F(SplitPoolTest, HugeRequestsGetTheirOwnSegments) {
  const Block a = Alloc(40 * kMiB);
  const Block b = Alloc(40 * kMiB);
  EXPECT_EQ(a.size, 40 * kMiB);
  EXPECT_EQ(b.size, 40 * kMiB);
  PoolStats s = pool_->Stats();
  EXPECT_EQ(s.device_allocs, 2u);
  EXPECT_EQ(s.inactive_split_bytes, 0u);
  EXPECT_EQ(device_->in_use(), 80 * kMiB);

  pool_->Free(a);
  const Block c = Alloc(40 * kMiB - 100);  // same rounded size: the cached segment
  EXPECT_EQ(c.ptr, a.ptr);
  EXPECT_EQ(c.size, 40 * kMiB);
  EXPECT_EQ(pool_->Stats().device_allocs, 2u);
  pool_->Free(b);
  pool_->Free(c);
  EXPECT_EQ(pool_->Reclaim(), 80 * kMiB);
  EXPECT_EQ(device_->in_use(), 0u);
}

TEST_F(SplitPoolTest, CachedHugeSegmentIsReusedOnlyWhenNotMuchLarger) {
  const Block big = Alloc(64 * kMiB);
  pool_->Free(big);
  // 64 MiB > 40 + 40/8 = 45 MiB: too wasteful, a new segment is taken.
  const Block mid = Alloc(40 * kMiB);
  EXPECT_NE(mid.ptr, big.ptr);
  EXPECT_EQ(pool_->Stats().device_allocs, 2u);
  // 64 MiB <= 60 + 7.5 MiB: reused whole, never split.
  const Block near = Alloc(60 * kMiB);
  EXPECT_EQ(near.ptr, big.ptr);
  EXPECT_EQ(near.size, 64 * kMiB);
  EXPECT_EQ(pool_->Stats().device_allocs, 2u);
  pool_->Free(mid);
  pool_->Free(near);
  // The bound is on the best fit: 40 MiB is too big for 33 MiB (> 33 + 4.125 MiB)...
  const Block r33 = Alloc(33 * kMiB);
  EXPECT_NE(r33.ptr, mid.ptr);
  EXPECT_EQ(pool_->Stats().device_allocs, 3u);
  // ...but serves 36 MiB (<= 36 + 4.5 MiB), ahead of the bigger 64 MiB segment.
  const Block r36 = Alloc(36 * kMiB);
  EXPECT_EQ(r36.ptr, mid.ptr);
  EXPECT_EQ(pool_->Stats().device_allocs, 3u);
  pool_->Free(r33);
  pool_->Free(r36);
}

TEST_F(SplitPoolTest, PressureReclaimsWhollyFreeSegmentsToStayUnderTheLimit) {
  Make(/*limit=*/48 * kMiB);
  pool_->Free(Alloc(2 * kMiB));         // a cached, wholly free 20 MiB large segment
  const Block small = Alloc(1 * kKiB);  // a 2 MiB small segment that stays live
  const Block huge = Alloc(40 * kMiB);  // 22 + 40 > 48: the idle segment must go
  PoolStats s = pool_->Stats();
  EXPECT_EQ(s.reclaimed_bytes_pressure, 20 * kMiB);
  EXPECT_EQ(s.reserved_bytes, 42 * kMiB);
  EXPECT_EQ(device_->in_use(), 42 * kMiB);
  ExpectConsistent(*pool_, {small, huge});

  // Nothing wholly free is left to reclaim: the next miss fails cleanly.
  absl::StatusOr<Block> more = pool_->Allocate(8 * kMiB);
  EXPECT_TRUE(absl::IsResourceExhausted(more.status())) << more.status();
  EXPECT_EQ(pool_->Stats().oom_count, 1u);
  pool_->Free(small);
  pool_->Free(huge);
}

TEST_F(SplitPoolTest, FallsBackToExactSegmentsWhenSharedOnesDoNotFit) {
  // Neither a 20 MiB large segment nor (once 15 MiB are held) a 2 MiB small one fits
  // under a 16 MiB limit; the requests themselves do.
  Make(/*limit=*/16 * kMiB);
  const Block large = Alloc(15 * kMiB);
  EXPECT_EQ(large.size, 15 * kMiB);
  EXPECT_EQ(device_->in_use(), 15 * kMiB);
  const Block small = Alloc(1000);
  EXPECT_EQ(small.size, 1024u);
  EXPECT_EQ(device_->in_use(), 15 * kMiB + 1024);
  EXPECT_EQ(pool_->Stats().oom_count, 0u);
  ExpectConsistent(*pool_, {large, small});
  pool_->Free(large);
  pool_->Free(small);
  EXPECT_EQ(pool_->Stats().inactive_split_bytes, 0u);
  EXPECT_EQ(pool_->Reclaim(), 15 * kMiB + 1024);
}

TEST_F(SplitPoolTest, DeviceTooSmallForASharedSegmentStillServes) {
  Make(kNoLimit, /*capacity=*/4 * kMiB);
  const Block b = Alloc(3 * kMiB);  // a 20 MiB segment fails on the device
  EXPECT_EQ(b.size, 3 * kMiB);
  EXPECT_EQ(device_->in_use(), 3 * kMiB);
  pool_->Free(b);
}

TEST_F(SplitPoolTest, AbsurdRequestFailsCleanly) {
  Make(/*limit=*/64 * kMiB);
  absl::StatusOr<Block> b = pool_->Allocate(std::numeric_limits<std::size_t>::max() - 5);
  EXPECT_TRUE(absl::IsResourceExhausted(b.status())) << b.status();
  EXPECT_EQ(pool_->Stats().reserved_bytes, 0u);
}

TEST_F(SplitPoolTest, RandomWorkloadKeepsTheInvariants) {
  constexpr std::uint64_t kLimit = 256 * kMiB;
  Make(kLimit);
  std::mt19937_64 rng(20240611);
  // Mostly small, some large, a few huge: the mix a predictor produces.
  auto pick_size = [&rng]() -> std::size_t {
    const int r = static_cast<int>(rng() % 100);
    if (r < 70) return 1 + rng() % kMiB;
    if (r < 95) return kMiB + 1 + rng() % (31 * kMiB);
    return 32 * kMiB + 1 + rng() % (32 * kMiB);
  };
  std::vector<Block> live;
  for (int op = 0; op < 3000; ++op) {
    if (!live.empty() && (rng() % 100 < 45 || live.size() > 200)) {
      const std::size_t i = rng() % live.size();
      pool_->Free(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else {
      absl::StatusOr<Block> b = pool_->Allocate(pick_size());
      if (b.ok()) {
        EXPECT_GE(b->size, b->requested);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->ptr) % DeviceAllocator::kAlignment, 0u);
        live.push_back(*b);
      } else {
        EXPECT_TRUE(absl::IsResourceExhausted(b.status())) << b.status();
      }
    }
    if (op % 50 == 0 && rng() % 4 == 0) pool_->Reclaim(rng() % (64 * kMiB));
    const PoolStats s = pool_->Stats();
    ASSERT_EQ(s.allocated_bytes + s.cached_bytes, s.reserved_bytes) << op;
    ASSERT_LE(s.reserved_bytes, kLimit) << op;
    ASSERT_EQ(s.reserved_bytes, device_->in_use()) << op;
    ASSERT_LE(s.inactive_split_bytes, s.cached_bytes) << op;
  }
  ExpectConsistent(*pool_, live);
  std::sort(live.begin(), live.end(), [](const Block& a, const Block& b) { return a.ptr < b.ptr; });
  for (std::size_t i = 1; i < live.size(); ++i) {
    ASSERT_LE(At(live[i - 1]) + live[i - 1].size, At(live[i]));
  }
  for (const Block& b : live) pool_->Free(b);
  const PoolStats s = pool_->Stats();
  EXPECT_EQ(s.inactive_split_bytes, 0u);  // everything coalesced back into whole segments
  EXPECT_EQ(pool_->Reclaim(), s.reserved_bytes);
  EXPECT_EQ(pool_->Stats().reserved_bytes, 0u);
  EXPECT_EQ(device_->in_use(), 0u);
}

}  // namespace
}  // namespace ndserve
