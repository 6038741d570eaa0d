#ifndef NDSERVE_MEMORY_BINNED_POOL_H_
#define NDSERVE_MEMORY_BINNED_POOL_H_

#include <array>
#include <vector>

#include "memory/pool.h"

namespace ndserve {

// Rounds every request up to a power of two (at least 512 B) and keeps one free list
// per power: allocation and free are O(1) pops and pushes. Requests above 128 MiB
// bypass the bins (they go to the device and back, and are still counted), since
// rounding them to a power of two would waste up to half of a huge block. Blocks up
// to 1 MiB also pass through per-thread caches (PoolOptions::thread_cache_bytes), so
// threads sharing the pool rarely meet on its lock.
// Ownership and threading as Pool.
class BinnedPool final : public Pool {
 public:
  static constexpr int kMinShift = 9;   // 512 B
  static constexpr int kMaxShift = 27;  // 128 MiB
  static constexpr std::size_t kMaxBinned = std::size_t{1} << kMaxShift;

  BinnedPool(std::unique_ptr<DeviceAllocator> allocator, PoolOptions options);
  ~BinnedPool() override;

  // Bytes a request of `bytes` occupies: its bin's size, or (bypass) its 256-byte
  // rounding.
  static std::size_t RoundedSize(std::size_t bytes);

 private:
  static constexpr int kBins = kMaxShift - kMinShift + 1;
  static int BinOf(std::size_t rounded);

  Block DoTakeCached(std::size_t bytes) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::size_t DoSegmentSize(std::size_t bytes) const override;
  Block DoAdoptSegment(Segment segment, std::size_t bytes) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Segment DoReturn(const Block& block) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DoCollectReclaimable(std::uint64_t target, std::vector<Segment>* out) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::array<std::vector<void*>, kBins> bins_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_BINNED_POOL_H_
