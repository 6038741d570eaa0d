#ifndef NDSERVE_MEMORY_STATS_TRACKER_H_
#define NDSERVE_MEMORY_STATS_TRACKER_H_

#include <atomic>
#include <cstdint>

#include "memory/block.h"
#include "memory/pool_stats.h"

namespace ndserve {

// What a layer that hands out and takes back blocks on its own (a thread cache) has
// counted since it last handed its counts over. Modular arithmetic: a layer that takes
// back blocks another one handed out goes "negative", and the sums still come out.
struct AllocationCounts {
  std::uint64_t allocated = 0, requested = 0, alloc_count = 0, free_count = 0;

  AllocationCounts& operator+=(const AllocationCounts& other) {
    allocated += other.allocated;
    requested += other.requested;
    alloc_count += other.alloc_count;
    free_count += other.free_count;
    return *this;
  }
};

// The counters behind one pool's PoolStats, and its peak of allocated bytes.
//
// Ownership: a plain value inside its pool. Thread-safety: none of its own except for
// the peak; the pool calls everything else with its free-list lock held, which is what
// makes a snapshot consistent with the free lists. The peak is an atomic so that a
// pool may refresh it outside that lock.
class StatsTracker {
 public:
  // A block the pool's lists or the device served. Returns the allocated bytes after it.
  std::uint64_t CountAllocation(const Block& block) {
    counts_.allocated += block.size;
    counts_.requested += block.requested;
    ++counts_.alloc_count;
    return counts_.allocated;
  }
  // A block given back to the pool's lists.
  void CountFree(const Block& block) {
    counts_.allocated -= block.size;
    counts_.requested -= block.requested;
    ++counts_.free_count;
  }
  // A segment taken from the device to serve an allocation (a cache miss).
  void CountDeviceAllocation() {
    ++device_allocs_;
    ++misses_;
  }
  // `segments` segments of `bytes` in all went back to the device; by Reclaim when
  // `reclaimed`, for `reason`.
  void CountDeviceFrees(std::uint64_t segments, std::uint64_t bytes, bool reclaimed,
                        ReclaimReason reason);
  void CountOutOfMemory() { ++ooms_; }
  // A front layer's counts join the pool's (its thread is exiting, or it shuts down).
  void Absorb(const AllocationCounts& counts) { counts_ += counts; }

  // Raises the peak to `allocated_bytes` if that is higher. Inline: it runs on every
  // allocation from the lists, and a call there makes the caller spill its Block.
  void NotePeak(std::uint64_t allocated_bytes) const {
    std::uint64_t peak = peak_.load(std::memory_order_relaxed);
    while (allocated_bytes > peak &&
           !peak_.compare_exchange_weak(peak, allocated_bytes, std::memory_order_relaxed)) {
    }
  }
  std::uint64_t peak_allocated_bytes() const { return peak_.load(std::memory_order_relaxed); }

  std::uint64_t allocated_bytes() const { return counts_.allocated; }
  std::uint64_t live_allocations() const { return counts_.alloc_count - counts_.free_count; }

  // Fills the counters of `out` from the pool's counts plus `front` (what front layers
  // have not handed over yet): bytes, counts, hits and misses, device calls, reclaims,
  // OOMs, live allocations and the peak (raised to the allocated bytes first). Leaves
  // the fields that other parts own (reserved, cached, limit, device, split) alone.
  void Fill(const AllocationCounts& front, PoolStats* out) const;

 private:
  AllocationCounts counts_;
  // Hits are derived (alloc_count - misses): one store fewer per allocation.
  std::uint64_t misses_ = 0;
  std::uint64_t device_allocs_ = 0, device_frees_ = 0, ooms_ = 0;
  std::uint64_t reclaimed_admin_ = 0, reclaimed_pressure_ = 0;
  mutable std::atomic<std::uint64_t> peak_{0};
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_STATS_TRACKER_H_
