#ifndef NDSERVE_MEMORY_BINNED_POOL_H_
#define NDSERVE_MEMORY_BINNED_POOL_H_

#include <array>
#include <memory>
#include <vector>

#include "memory/pool.h"
#include "memory/size_classes.h"
#include "memory/thread_cache.h"

namespace ndserve {

// Rounds every request up to its power-of-two size class (SizeClasses: at least
// 512 B) and keeps one free list per class: allocation and free are O(1) pops and
// pushes. Requests above 128 MiB bypass the lists (they go to the device and back, and
// are still counted), since rounding them to a power of two would waste up to half of
// a huge block.
//
// Blocks up to ThreadCache::kMaxBytes (1 MiB) also pass through per-thread caches in
// front of the lists (PoolOptions::thread_cache_bytes per thread; off at debug levels
// 1-2, whose leak records would put a lock back on that path), so threads sharing the
// pool rarely meet on its lock. The caches are the pool's front layer in Pool's
// contract: their blocks count as cached, Reclaim and pressure drain them, Stats adds
// their counts in, and a thread that exits hands its cache back.
//
// Ownership and threading as Pool; the pool owns its ThreadCacheSet.
class BinnedPool final : public Pool, private ThreadCacheOwner {
 public:
  static constexpr int kMinShift = SizeClasses::kMinShift;  // 512 B
  static constexpr int kMaxShift = SizeClasses::kMaxShift;  // 128 MiB
  static constexpr std::size_t kMaxBinned = SizeClasses::kMaxBytes;

  BinnedPool(std::unique_ptr<DeviceAllocator> allocator, PoolOptions options);
  ~BinnedPool() override;

  PoolStats Stats() const override;

  // Bytes a request of `bytes` occupies: its class's size, or (bypass) its 256-byte
  // rounding.
  static std::size_t RoundedSize(std::size_t bytes);

 private:
  absl::StatusOr<Block> AllocateBlock(std::size_t bytes, absl::string_view owner) override;
  void FreeBlock(const Block& block) override;
  void FreeBlocks(absl::Span<const Block> blocks) override;
  void FlushFront() override;
  std::uint64_t FrontAllocatedBytes() const override;
  void AbsorbThreadCache(ThreadCache& cache) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache.mu);

  // Whether blocks of `bytes` pass through thread caches: caches on, 1..kMaxBytes.
  bool Cacheable(std::size_t bytes) const {
    return caches_ != nullptr && bytes - 1 < ThreadCache::kMaxBytes;
  }
  // This thread's cache if blocks of `bytes` pass through one and the thread has
  // created it, else null.
  ABSL_ATTRIBUTE_ALWAYS_INLINE ThreadCache* CacheFor(std::size_t bytes) const {
    return Cacheable(bytes) ? caches_->MineIfCreated() : nullptr;
  }
  // The paths past a thread-cache miss, out of line so that the hit needs next to no
  // frame.
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Block> AllocateMissed(std::size_t bytes,
                                                               absl::string_view owner);
  ABSL_ATTRIBUTE_NOINLINE void FreeMissed(const Block& block);
  // Blocks a thread cache held go back on their lists (whole class blocks, which the
  // lists keep: nothing goes to the device).
  void PushHeld(const std::vector<Block>& held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Block DoTakeCached(std::size_t bytes) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::size_t DoSegmentSize(std::size_t bytes) const override;
  Block DoAdoptSegment(Segment segment, std::size_t bytes) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Segment DoReturn(const Block& block) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DoCollectReclaimable(std::uint64_t target, std::vector<Segment>* out) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DoLayout(std::vector<LayoutSegment>* out) const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::array<std::vector<void*>, SizeClasses::kCount> bins_ ABSL_GUARDED_BY(mu_);
  // Null: no thread caches (turned off, or every per-thread slot is taken).
  std::unique_ptr<ThreadCacheSet> caches_;
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_BINNED_POOL_H_
