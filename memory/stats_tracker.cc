#include "memory/stats_tracker.h"

namespace ndserve {

void StatsTracker::CountDeviceFrees(std::uint64_t segments, std::uint64_t bytes, bool reclaimed,
                                    ReclaimReason reason) {
  device_frees_ += segments;
  if (!reclaimed) return;
  (reason == ReclaimReason::kAdmin ? reclaimed_admin_ : reclaimed_pressure_) += bytes;
}

void StatsTracker::Fill(const AllocationCounts& front, PoolStats* out) const {
  AllocationCounts all = counts_;
  all += front;
  out->allocated_bytes = all.allocated;
  out->requested_bytes = all.requested;
  out->alloc_count = all.alloc_count;
  out->free_count = all.free_count;
  out->outstanding_allocations = all.alloc_count - all.free_count;
  out->cache_hits = all.alloc_count - misses_;  // every allocation not from the device
  out->cache_misses = misses_;
  out->device_allocs = device_allocs_;
  out->device_frees = device_frees_;
  out->reclaimed_bytes_admin = reclaimed_admin_;
  out->reclaimed_bytes_pressure = reclaimed_pressure_;
  out->oom_count = ooms_;
  NotePeak(all.allocated);
  out->peak_allocated_bytes = peak_allocated_bytes();
}

}  // namespace ndserve
