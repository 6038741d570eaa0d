#ifndef NDSERVE_MEMORY_LIMIT_GUARD_H_
#define NDSERVE_MEMORY_LIMIT_GUARD_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "memory/pool_stats.h"

namespace ndserve {

// Keeps a pool's reserved bytes (everything it holds from the device, cached blocks
// included) at or under its limit. The pool reserves a segment's bytes before it asks
// the device for them and releases them only once the device has them back, so the
// count never understates what the device holds for the pool, and concurrent misses
// cannot together overshoot the limit (docs/design.md §3).
//
// Ownership: a plain value inside its pool. Thread-safe and lock-free: the count is
// one atomic, so a reservation never waits for the pool's free-list lock.
class LimitGuard {
 public:
  explicit LimitGuard(std::uint64_t limit_bytes) : limit_(limit_bytes) {}
  LimitGuard(const LimitGuard&) = delete;
  LimitGuard& operator=(const LimitGuard&) = delete;

  // Counts `bytes` as reserved, or RESOURCE_EXHAUSTED (naming the limit) when that
  // would take the reserved bytes past the limit; nothing is counted then.
  absl::Status Reserve(std::uint64_t bytes);
  // Takes back a reservation; the caller has returned those bytes to the device.
  void Release(std::uint64_t bytes) { reserved_.fetch_sub(bytes, std::memory_order_relaxed); }

  std::uint64_t reserved_bytes() const { return reserved_.load(std::memory_order_relaxed); }
  std::uint64_t limit_bytes() const { return limit_; }  // kNoLimit: unlimited

 private:
  const std::uint64_t limit_;
  std::atomic<std::uint64_t> reserved_{0};
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_LIMIT_GUARD_H_
