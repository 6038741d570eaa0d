#ifndef NDSERVE_MEMORY_POOL_H_
#define NDSERVE_MEMORY_POOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "memory/block.h"
#include "memory/device_allocator.h"
#include "memory/leak_tracker.h"
#include "memory/limit_guard.h"
#include "memory/pool_layout.h"
#include "memory/pool_stats.h"
#include "memory/spin_lock.h"
#include "memory/stats_tracker.h"

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
//  - Failure: Allocate escalates cache -> device -> reclaim own cache (front layer
//    flushed first) -> reclaim hooks -> RESOURCE_EXHAUSTED with a memory status in
//    the message. Never aborts.
//  - Thread-safe: any thread may call any method. One short lock guards the free
//    lists and counters (the reserved bytes are LimitGuard's own atomic); it is never
//    held across a device call or a hook. A pool may
//    put a front layer before its lists (the binned pool's per-thread caches): blocks
//    in it count as cached, Reclaim and memory pressure flush it into the lists, and
//    Stats adds its counts in, so the numbers stay exact whenever no call is in
//    flight. Peak allocated is the exception: with a front layer it is refreshed on
//    every shared-list allocation and every Stats read, so a spike served wholly from
//    the front layer between two of those may be missed (by at most what it held).
//
// The pool is built from parts, each in its own file: LimitGuard (the limit and the
// reserved bytes), StatsTracker (counters and peak), LeakTracker (debug levels 1-2).
// This class keeps the contract, the shared-list path and the escalation ladder
// (docs/design.md §3). Subclasses implement the caching policy through the Do* hooks
// below, all called with mu_ held, and must call ReleaseAllCached() from their
// destructor. A subclass with a front layer declares it (DeclareFrontLayer) and
// overrides AllocateBlock, FreeBlock, FreeBlocks, FlushFront, FrontAllocatedBytes and
// Stats; the base knows nothing else about it.
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
  absl::StatusOr<Block> Allocate(std::size_t bytes, absl::string_view owner = {}) {
    return AllocateBlock(bytes, owner);
  }
  void Free(const Block& block) { FreeBlock(block); }
  // Frees several blocks under one lock acquisition (a closing scope returns all its
  // arrays at once). Same contract as Free for each block.
  void FreeAll(absl::Span<const Block> blocks) { FreeBlocks(blocks); }
  // Returns cached memory to the device until at least `target_bytes` went back
  // (0 = everything cached). Returns the bytes released.
  std::uint64_t Reclaim(std::uint64_t target_bytes = 0,
                        ReclaimReason reason = ReclaimReason::kAdmin);
  void AddReclaimHook(ReclaimHook hook);

  virtual PoolStats Stats() const;
  // Every segment the pool holds and the blocks in it (memory/pool_layout.h), read under
  // the lock in one pass. A front layer is flushed into the lists first (as Reclaim
  // does), so its blocks show as cached. For the memory map, not for a hot path.
  PoolLayout Layout();
  // Live allocations with owners (level >= 1) and stack traces (level 2).
  std::vector<OutstandingAllocation> Outstanding() const { return leaks_.List(); }
  // The human-readable memory status paragraph (docs/design.md §3).
  std::string MemoryStatus(bool include_outstanding = true) const;

  PoolKind kind() const { return kind_; }
  absl::string_view name() const { return PoolKindName(kind_); }
  Device device() const { return allocator_->device(); }
  DeviceAllocator* allocator() const { return allocator_.get(); }
  std::uint64_t limit_bytes() const { return limit_.limit_bytes(); }
  int debug_level() const { return leaks_.level(); }

 protected:
  // A span of device memory exactly as the allocator returned it.
  struct Segment {
    void* ptr;
    std::size_t bytes;
  };

  // The paths behind Allocate, Free and FreeAll: the shared lists, then the
  // escalation. A pool with a front layer overrides them, serves what it can from
  // the layer and calls these for the rest.
  virtual absl::StatusOr<Block> AllocateBlock(std::size_t bytes, absl::string_view owner);
  virtual void FreeBlock(const Block& block);
  virtual void FreeBlocks(absl::Span<const Block> blocks);
  // From the constructor of a pool that has a front layer: only then does the base
  // call the two hooks below (pools without one pay no virtual call for them).
  void DeclareFrontLayer() { has_front_layer_ = true; }
  // Moves every block the front layer holds into the shared lists. Called without
  // mu_ (before Reclaim, under pressure).
  virtual void FlushFront() {}
  // Allocated bytes the front layer counts that the pool's own counters do not yet
  // hold (may be a moment old): added in for the peak.
  virtual std::uint64_t FrontAllocatedBytes() const { return 0; }
  // Stats with the front layer's not yet absorbed counts (`front`) added in. A pool
  // with a front layer overrides Stats() to call this while that layer stands still.
  PoolStats StatsWith(const AllocationCounts& front) const;
  // A front layer hands its counts over for good (its thread is exiting).
  void AbsorbFrontCounts(const AllocationCounts& counts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    stats_.Absorb(counts);
  }
  // Hands the blocks to the lists in one lock acquisition; segments the policy does
  // not keep go back to the device after it. Leak records are the caller's to erase.
  void FreeToLists(absl::Span<const Block* const> blocks);

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
  // Appends the segments the policy knows of (any order; Layout sorts) and returns
  // whether live blocks are among them (PoolLayout::lists_allocated).
  virtual bool DoLayout(std::vector<LayoutSegment>* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;

  // For subclass destructors: every cached segment goes back to the device.
  void ReleaseAllCached();

  static std::size_t RoundUp(std::size_t n, std::size_t multiple) {
    return (n + multiple - 1) / multiple * multiple;
  }

  mutable SpinLock mu_;

 private:
  // The escalation after a cache miss.
  absl::StatusOr<Block> AllocateSlow(std::size_t bytes);
  // One pass of cache -> device. RESOURCE_EXHAUSTED when neither has room.
  absl::StatusOr<Block> TryAllocate(std::size_t bytes);
  // Takes `segment_bytes` from the device within the limit; reserves before the call.
  absl::StatusOr<void*> AcquireSegment(std::size_t segment_bytes);
  // Counts a block the lists or the device served; returns the pool's own allocated
  // bytes after it. Without a front layer those are all there is, so the peak is
  // exact and checked right here.
  std::uint64_t CountAllocation(const Block& block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::uint64_t allocated = stats_.CountAllocation(block);
    if (!has_front_layer_) stats_.NotePeak(allocated);
    return allocated;
  }
  // With a front layer: the peak check after an allocation from the lists or the
  // device, outside mu_ (the peak is the one part of the tracker that needs no lock).
  void NotePeakWithFront(std::uint64_t shared_allocated) {
    ABSL_TS_UNCHECKED_READ(stats_).NotePeak(shared_allocated + FrontAllocatedBytes());
  }
  void ReleaseSegments(absl::Span<const Segment> segments, ReclaimReason reason,
                       bool count_as_reclaim);
  absl::Status OutOfMemory(std::size_t bytes, const absl::Status& cause);

  const PoolKind kind_;
  const std::unique_ptr<DeviceAllocator> allocator_;
  LimitGuard limit_;
  StatsTracker stats_ ABSL_GUARDED_BY(mu_);
  LeakTracker leaks_;
  bool has_front_layer_ = false;  // set before the pool is shared, then constant

  mutable absl::Mutex hooks_mu_;
  std::vector<ReclaimHook> hooks_ ABSL_GUARDED_BY(hooks_mu_);
};

// Builds a pool of `kind` over `allocator`.
std::unique_ptr<Pool> MakePool(PoolKind kind, std::unique_ptr<DeviceAllocator> allocator,
                               PoolOptions options = {});

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_POOL_H_
