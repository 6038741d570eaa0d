#ifndef NDSERVE_MEMORY_POOL_STATS_H_
#define NDSERVE_MEMORY_POOL_STATS_H_

#include <cstdint>
#include <limits>
#include <string>

namespace ndserve {

inline constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

enum class ReclaimReason { kAdmin, kPressure };

// One consistent snapshot of a pool's counters (taken under the pool's lock).
// Invariant at every snapshot: allocated + cached == reserved <= limit.
struct PoolStats {
  std::uint64_t allocated_bytes = 0;  // live blocks, as rounded by the pool
  std::uint64_t requested_bytes = 0;  // live blocks, as the callers asked
  std::uint64_t cached_bytes = 0;     // free but still held from the device
  std::uint64_t reserved_bytes = 0;   // held from the device
  std::uint64_t limit_bytes = kNoLimit;
  std::uint64_t peak_allocated_bytes = 0;
  std::uint64_t device_total_bytes = 0;
  std::uint64_t device_free_bytes = 0;
  std::uint64_t alloc_count = 0;  // successful Allocate calls
  std::uint64_t free_count = 0;
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_misses = 0;
  std::uint64_t device_allocs = 0;
  std::uint64_t device_frees = 0;
  std::uint64_t reclaimed_bytes_admin = 0;
  std::uint64_t reclaimed_bytes_pressure = 0;
  std::uint64_t oom_count = 0;
  std::uint64_t outstanding_allocations = 0;
  // Free pieces inside segments that also hold live blocks: cached bytes that cannot
  // go back to the device until their neighbours are freed (fragmentation).
  std::uint64_t inactive_split_bytes = 0;

  std::uint64_t reclaimed_bytes_total() const {
    return reclaimed_bytes_admin + reclaimed_bytes_pressure;
  }
};

// "1.500 GiB", "512 B": the unit style of memory_status.
std::string FormatBytes(std::uint64_t bytes);

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_POOL_STATS_H_
