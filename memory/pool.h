#ifndef NDSERVE_MEMORY_POOL_H_
#define NDSERVE_MEMORY_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "absl/synchronization/mutex.h"
#include "memory/block.h"
#include "memory/device_allocator.h"
#include "memory/leak_tracker.h"
#include "memory/pool_stats.h"
#include "memory/spin_lock.h"
#include "memory/thread_cache.h"

namespace ndserve {

enum class PoolKind { kBinned, kSplit, kSimple, kNone };

absl::string_view PoolKindName(PoolKind kind);
// Accepts "binned", "split", "simple", "none" (case-insensitive).
absl::StatusOr<PoolKind> ParsePoolKind(absl::string_view name);

// No device has 256 TiB; anything larger is refused before the pools round it (their
// round-ups would overflow near SIZE_MAX).
inline constexpr std::size_t kMaxAllocationBytes = std::size_t{1} << 48;

// Per-thread front caches of the binned pool: a few MiB per thread keeps the common
// small alloc+free pairs off the shared lock, and Reclaim still reaches them.
inline constexpr std::size_t kDefaultThreadCacheBytes = std::size_t{4} << 20;

struct PoolOptions {
  std::uint64_t limit_bytes = kNoLimit;  // cap on reserved bytes (cached bytes count)
  int debug_level = 0;                   // 0 off, 1 outstanding list, 2 + stack traces
  // Bytes of freed blocks each thread may keep for itself (binned pool only; 0: off).
  std::size_t thread_cache_bytes = kDefaultThreadCacheBytes;
};

// A caching layer between arrays and one DeviceAllocator.
//
// Contract, written once here for every pool kind:
//  - Ownership: the pool owns its allocator and every segment it took from it. A Block
//    belongs to the caller from Allocate until Free; Free takes exactly a Block this
//    pool returned, once. Destroying a pool with live blocks leaks them (and says so in
//    the log); cached memory goes back to the device.
//  - Alignment: every non-empty block is aligned to DeviceAllocator::kAlignment (256).
//    Allocate(0) returns an empty Block; Free of an empty Block does nothing.
//  - Streams: blocks are not stream-ordered. Whoever queued device work on a block
//    synchronizes that work before Free (the predictor does so when a request's
//    context closes), so a freed block may be handed out again at once.
//  - Limit: reserved bytes never exceed limit_bytes; cached bytes count.
//  - Failure: Allocate escalates cache -> device -> reclaim own cache -> reclaim
//    hooks -> RESOURCE_EXHAUSTED with a memory status in the message. Never aborts.
//  - Thread-safe: any thread may call any method. One short lock guards the free
//    lists and counters; it is never held across a device call or a hook. A pool may
//    put per-thread caches in front of its lists (ThreadCache): blocks in them count
//    as cached, Reclaim and memory pressure drain them from every thread, and Stats
//    adds their counters in, so the numbers stay exact whenever no call is in flight.
//    Peak allocated is the exception: with thread caches it is refreshed on every
//    shared-list allocation and every Stats read, so a spike served wholly from
//    thread caches between two of those may be missed (by at most what they held).
//
// Subclasses implement the caching policy through the Do* hooks below, all called
// with mu_ held, and must call ReleaseAllCached() from their destructor.
class Pool {
 public:
  // Frees some engine-held memory back into the pool when it runs dry; returns the
  // bytes it released. Called without the pool's lock, from the allocating thread.
  using ReclaimHook = std::function<std::uint64_t(std::uint64_t bytes_needed)>;

  Pool(PoolKind kind, std::unique_ptr<DeviceAllocator> allocator, PoolOptions options);
  virtual ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // `owner` names who asked (a manager's name) in leak reports; ignored at level 0.
  // Inline: the thread-cache hit is the hot path and costs a few dozen instructions.
  ABSL_ATTRIBUTE_ALWAYS_INLINE absl::StatusOr<Block> Allocate(std::size_t bytes,
                                                              absl::string_view owner = {}) {
    if (ThreadCache* cache = FrontCacheFor(bytes); cache != nullptr) {
      if (Block block = cache->Take(bytes); !block.empty()) return block;
    }
    return AllocateShared(bytes, owner);
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE void Free(const Block& block) {
    if (ThreadCache* cache = FrontCacheFor(block.size); cache != nullptr && cache->Put(block)) {
      return;
    }
    FreeShared(block);
  }
  // Frees several blocks under one lock acquisition (a closing scope returns all its
  // arrays at once). Same contract as Free for each block.
  void FreeAll(absl::Span<const Block> blocks);
  // Returns cached memory to the device until at least `target_bytes` went back
  // (0 = everything cached). Returns the bytes released.
  std::uint64_t Reclaim(std::uint64_t target_bytes = 0,
                        ReclaimReason reason = ReclaimReason::kAdmin);
  void AddReclaimHook(ReclaimHook hook);

  PoolStats Stats() const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Live allocations with owners (level >= 1) and stack traces (level 2).
  std::vector<OutstandingAllocation> Outstanding() const;
  // The human-readable memory status paragraph (docs/design.md §3).
  std::string MemoryStatus(bool include_outstanding = true) const;

  PoolKind kind() const { return kind_; }
  absl::string_view name() const { return PoolKindName(kind_); }
  Device device() const { return allocator_->device(); }
  DeviceAllocator* allocator() const { return allocator_.get(); }
  std::uint64_t limit_bytes() const { return options_.limit_bytes; }
  int debug_level() const { return options_.debug_level; }

 protected:
  // A span of device memory exactly as the allocator returned it.
  struct Segment {
    void* ptr;
    std::size_t bytes;
  };

  // Serve `bytes` (> 0) from the cache, or return an empty Block.
  virtual Block DoTakeCached(std::size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // How many bytes to take from the device for a request of `bytes` that missed.
  virtual std::size_t DoSegmentSize(std::size_t bytes) const = 0;
  // The smallest segment that still serves `bytes`; tried when DoSegmentSize's does
  // not fit under the limit or on the device (a pool that carves requests out of
  // bigger segments must still serve them when only the exact size fits).
  virtual std::size_t DoMinSegmentSize(std::size_t bytes) const { return DoSegmentSize(bytes); }
  // Turn a fresh device segment into the block for `bytes`; the rest (if any) joins
  // the cache.
  virtual Block DoAdoptSegment(Segment segment, std::size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // Take back a freed block. Returns the segment to give back to the device at once,
  // if the policy does not cache it (ptr == nullptr otherwise).
  virtual Segment DoReturn(const Block& block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // Remove cached segments, largest first, until their bytes reach `target` (0 = all),
  // and hand them over for release.
  virtual void DoCollectReclaimable(std::uint64_t target, std::vector<Segment>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  virtual std::uint64_t DoInactiveSplitBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return 0;
  }

  // For subclass destructors: every cached segment goes back to the device.
  void ReleaseAllCached();
  // For pools whose blocks up to ThreadCache::kMaxBytes come in its power-of-two
  // classes (the binned pool): from its constructor, when options ask for them.
  void EnableThreadCaches();
  // From the destructor of such a pool, before ReleaseAllCached: every thread's
  // cached blocks come back and later frees from those threads skip their caches.
  void ShutdownThreadCaches() ABSL_NO_THREAD_SAFETY_ANALYSIS;

  static std::size_t RoundUp(std::size_t n, std::size_t multiple) {
    return (n + multiple - 1) / multiple * multiple;
  }

  mutable SpinLock mu_;

 private:
  friend class ThreadCache;

  struct Counters {
    // With thread caches these are the shared lists' part; each cache adds its own.
    std::uint64_t allocated = 0, requested = 0, reserved = 0;
    // Hits and live allocations are derived (alloc_count - misses, - free_count): fewer
    // stores on the hot path.
    std::uint64_t alloc_count = 0, free_count = 0, misses = 0;
    std::uint64_t device_allocs = 0, device_frees = 0, ooms = 0;
    std::uint64_t reclaimed_admin = 0, reclaimed_pressure = 0;
  };

  // This thread's cache if blocks of `bytes` (1..ThreadCache::kMaxBytes) may pass
  // through one, else null. Pools with thread caches never track leaks (see
  // EnableThreadCaches), so a hit needs no leak bookkeeping.
  ABSL_ATTRIBUTE_ALWAYS_INLINE ThreadCache* FrontCacheFor(std::size_t bytes) {
    if (front_ == nullptr || bytes - 1 >= ThreadCache::kMaxBytes) return nullptr;
    return front_->Mine();
  }
  // Allocate and Free past the thread cache: the shared lists, then the escalation.
  absl::StatusOr<Block> AllocateShared(std::size_t bytes, absl::string_view owner);
  void FreeShared(const Block& block);
  // The escalation after a cache miss.
  absl::StatusOr<Block> AllocateSlow(std::size_t bytes);
  // One pass of cache -> device. RESOURCE_EXHAUSTED when neither has room.
  absl::StatusOr<Block> TryAllocate(std::size_t bytes);
  // Takes `segment_bytes` from the device within the limit; reserves before the call.
  absl::StatusOr<void*> AcquireSegment(std::size_t segment_bytes);
  // Counts a block the shared lists or the device served; returns the shared part of
  // allocated bytes after it.
  std::uint64_t CountAllocated(const Block& block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FreeToLists(const Block* const* blocks, std::size_t n);
  void UpdatePeak(std::uint64_t allocated) const;
  // With thread caches: the peak check after a shared-list allocation, outside mu_.
  void NotePeak(std::uint64_t shared_allocated);
  // Moves every thread cache's blocks into the shared lists (pressure, Reclaim).
  void DrainThreadCaches() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // A thread that owns `cache` is exiting: its blocks and counters join the pool's.
  void AbsorbThreadCache(ThreadCache* cache) ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache->mu);
  void TakeBackLocked(const std::vector<Block>& held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseSegments(absl::Span<const Segment> segments, ReclaimReason reason,
                       bool count_as_reclaim);
  absl::Status OutOfMemory(std::size_t bytes, const absl::Status& cause);

  const PoolKind kind_;
  const std::unique_ptr<DeviceAllocator> allocator_;
  const PoolOptions options_;
  Counters counters_ ABSL_GUARDED_BY(mu_);
  mutable std::atomic<std::uint64_t> peak_{0};
  std::unique_ptr<ThreadCacheSet> front_;  // null: no thread caches
  LeakTracker leaks_;

  mutable absl::Mutex hooks_mu_;
  std::vector<ReclaimHook> hooks_ ABSL_GUARDED_BY(hooks_mu_);
};

// Builds a pool of `kind` over `allocator`.
std::unique_ptr<Pool> MakePool(PoolKind kind, std::unique_ptr<DeviceAllocator> allocator,
                               PoolOptions options = {});

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_POOL_H_
