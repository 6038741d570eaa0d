// StatsTracker alone: the counters a PoolStats is filled from, and the peak.
#include "memory/stats_tracker.h"

#include "gtest/gtest.h"

namespace ndserve {
namespace {

Block BlockOf(std::size_t requested, std::size_t size) {
  return Block{reinterpret_cast<void*>(0x1000), requested, size, nullptr};
}

TEST(StatsTrackerTest, CountsAllocationsFreesAndDeviceCalls) {
  StatsTracker stats;
  EXPECT_EQ(stats.CountAllocation(BlockOf(3000, 4096)), 4096u);
  stats.CountDeviceAllocation();
  EXPECT_EQ(stats.CountAllocation(BlockOf(100, 512)), 4608u);
  stats.CountDeviceAllocation();
  EXPECT_EQ(stats.CountAllocation(BlockOf(4000, 4096)), 8704u);  // from the cache
  stats.CountFree(BlockOf(3000, 4096));
  stats.CountOutOfMemory();
  stats.CountDeviceFrees(1, 512, /*reclaimed=*/false, ReclaimReason::kAdmin);
  stats.CountDeviceFrees(2, 8192, /*reclaimed=*/true, ReclaimReason::kAdmin);
  stats.CountDeviceFrees(1, 1024, /*reclaimed=*/true, ReclaimReason::kPressure);
  EXPECT_EQ(stats.allocated_bytes(), 4608u);
  EXPECT_EQ(stats.live_allocations(), 2u);

  PoolStats s;
  s.reserved_bytes = 12345;  // not the tracker's: left alone
  stats.Fill(AllocationCounts{}, &s);
  EXPECT_EQ(s.allocated_bytes, 4608u);
  EXPECT_EQ(s.requested_bytes, 4100u);
  EXPECT_EQ(s.alloc_count, 3u);
  EXPECT_EQ(s.free_count, 1u);
  EXPECT_EQ(s.outstanding_allocations, 2u);
  EXPECT_EQ(s.cache_misses, 2u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.device_allocs, 2u);
  EXPECT_EQ(s.device_frees, 4u);
  EXPECT_EQ(s.reclaimed_bytes_admin, 8192u);
  EXPECT_EQ(s.reclaimed_bytes_pressure, 1024u);
  EXPECT_EQ(s.oom_count, 1u);
  EXPECT_EQ(s.reserved_bytes, 12345u);
  EXPECT_EQ(s.peak_allocated_bytes, 4608u);  // Fill raised it to what is allocated
}

TEST(StatsTrackerTest, PeakOnlyRises) {
  StatsTracker stats;
  stats.NotePeak(1000);
  stats.NotePeak(400);
  EXPECT_EQ(stats.peak_allocated_bytes(), 1000u);
  stats.NotePeak(5000);
  EXPECT_EQ(stats.peak_allocated_bytes(), 5000u);
  PoolStats s;
  stats.Fill(AllocationCounts{}, &s);  // nothing allocated: the peak stays
  EXPECT_EQ(s.peak_allocated_bytes, 5000u);
}

TEST(StatsTrackerTest, FrontCountsAddInEvenWhenTheyAreNegative) {
  StatsTracker stats;
  // The pool's lists handed out two blocks; a thread cache took one of them back
  // (its counts go "negative") and handed out another one of its own.
  stats.CountAllocation(BlockOf(1000, 1024));
  stats.CountAllocation(BlockOf(2000, 2048));
  AllocationCounts front;
  front.allocated = std::uint64_t{0} - 2048 + 1024;
  front.requested = std::uint64_t{0} - 2000 + 900;
  front.alloc_count = 1;
  front.free_count = 1;
  PoolStats s;
  stats.Fill(front, &s);
  EXPECT_EQ(s.allocated_bytes, 2048u);
  EXPECT_EQ(s.requested_bytes, 1900u);
  EXPECT_EQ(s.alloc_count, 3u);
  EXPECT_EQ(s.free_count, 1u);
  EXPECT_EQ(s.outstanding_allocations, 2u);
  EXPECT_EQ(s.cache_hits, 3u);  // no device allocation was counted
  // Absorbing the same counts makes them the tracker's own: same totals.
  stats.Absorb(front);
  PoolStats absorbed;
  stats.Fill(AllocationCounts{}, &absorbed);
  EXPECT_EQ(absorbed.allocated_bytes, s.allocated_bytes);
  EXPECT_EQ(absorbed.requested_bytes, s.requested_bytes);
  EXPECT_EQ(absorbed.outstanding_allocations, 2u);
  EXPECT_EQ(stats.live_allocations(), 2u);
}

}  // namespace
}  // namespace ndserve
