#ifndef NDSERVE_MEMORY_THREAD_CACHE_H_
#define NDSERVE_MEMORY_THREAD_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "memory/block.h"
#include "memory/size_classes.h"
#include "memory/spin_lock.h"
#include "memory/stats_tracker.h"

namespace ndserve {

class ThreadCache;

// Where the blocks and counts of a ThreadCache go when its thread exits: the shared
// free lists of the pool the cache sits in front of (the binned pool).
class ThreadCacheOwner {
 public:
  // `cache`'s thread is exiting (its `mu` is held): drain its blocks into the shared
  // lists and fold its counts into the pool's.
  virtual void AbsorbThreadCache(ThreadCache& cache) = 0;

 protected:
  ~ThreadCacheOwner() = default;
};

// One thread's private stash of freed small blocks in front of the binned pool's
// shared free lists. A pair of allocate+free that stays inside it touches only this
// thread's cache lines, so threads sharing a pool no longer bounce the pool lock's
// line between cores.
//
// Ownership: the blocks it holds belong to the pool (they count as cached), the cache
// object to a ThreadCacheSet and the thread that uses it, jointly.
// Thread-safety: the owning thread takes and puts; any thread may drain it or read its
// counters while holding `mu` (that is how Reclaim and Stats reach idle threads'
// caches). The owning thread only try-locks `mu`: while a reader holds it, the owner
// uses the pool's shared lists instead of waiting.
//
// Its counts are this thread's contribution to the pool's totals since the last fold
// (AllocationCounts: a thread that frees blocks another thread allocated goes
// "negative"); the pool adds them to its own when it reads or absorbs the cache.
class alignas(64) ThreadCache {
 public:
  // The smallest kClasses of the binned pool's size classes: 512 B .. 1 MiB. Larger
  // blocks are rarer and would tie up a thread's budget in a few blocks.
  static constexpr int kClasses = 12;
  static constexpr int kDepth = 8;  // blocks kept per class at most
  static constexpr std::size_t kMaxBytes = SizeClasses::Bytes(kClasses - 1);

  // Size class of a request of 1..kMaxBytes bytes, rounded up as the binned pool does.
  static int ClassOf(std::size_t bytes) { return SizeClasses::Of(bytes); }
  static std::size_t ClassBytes(int c) { return SizeClasses::Bytes(c); }

  // `owner` absorbs the cache when its thread exits (null: nobody does). The cache
  // keeps at most `capacity_bytes` of blocks.
  ThreadCache(ThreadCacheOwner* owner, std::size_t capacity_bytes)
      : owner_(owner), capacity_(capacity_bytes) {}

  // Owner thread. A block for `bytes` (1..kMaxBytes) if one of its class is held,
  // else an empty Block. Never waits: while a reader (Stats, Reclaim) holds the cache
  // the owner goes to the shared lists instead, as on a miss.
  ABSL_ATTRIBUTE_ALWAYS_INLINE Block TryTake(std::size_t bytes) {
    const int c = ClassOf(bytes);
    const std::size_t size = ClassBytes(c);
    if (!mu.TryLock()) return Block{};
    Bin& bin = bins_[c];
    if (bin.count == 0) {
      mu.Unlock();
      return Block{};
    }
    void* ptr = bin.slots[--bin.count];
    held_ -= size;
    allocated_.store(allocated_.load(std::memory_order_relaxed) + size,
                     std::memory_order_relaxed);
    requested_ += bytes;
    ++alloc_count_;
    mu.Unlock();
    return Block{ptr, bytes, size, nullptr};
  }

  // Owner thread. Keeps a freed block if its class has room and the byte budget
  // allows; false sends it to the pool's shared lists (so does a reader holding the
  // cache: the owner never waits).
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool TryPut(const Block& block) {
    if (!mu.TryLock()) return false;
    const bool kept = PutLocked(block);
    mu.Unlock();
    return kept;
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool PutLocked(const Block& block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (block.size > kMaxBytes || held_ + block.size > capacity_) return false;
    Bin& bin = bins_[ClassOf(block.size)];
    if (bin.count == kDepth) return false;
    bin.slots[bin.count++] = block.ptr;
    held_ += block.size;
    allocated_.store(allocated_.load(std::memory_order_relaxed) - block.size,
                     std::memory_order_relaxed);
    requested_ -= block.requested;
    ++free_count_;
    return true;
  }

  // Hands every held block to `out` (as blocks of their class size, nothing
  // requested) and forgets them. Counts are unchanged: a held block is cached both
  // here and in the pool's lists.
  void DrainLocked(std::vector<Block>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  AllocationCounts CountsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return AllocationCounts{allocated_.load(std::memory_order_relaxed), requested_, alloc_count_,
                            free_count_};
  }
  // Returns the counts and zeroes them (the pool took them into its own).
  AllocationCounts FoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Allocated-bytes contribution, readable without `mu` (may be a moment old): for
  // the pool's peak, which must not wait for every thread's lock.
  std::uint64_t allocated_relaxed() const { return allocated_.load(std::memory_order_relaxed); }

  // The pool this cache feeds; null once the pool shut its caches down.
  ThreadCacheOwner* owner() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return owner_; }
  void Detach() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { owner_ = nullptr; }
  // Its thread is exiting: blocks and counts go back to the pool (if it still has
  // one), and the cache is marked retired.
  void RetireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Set when its thread exited and the pool absorbed it; the set then drops it.
  bool retired() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return retired_; }

  mutable SpinLock mu;

 private:
  struct Bin {
    std::uint32_t count = 0;
    void* slots[kDepth];
  };

  ThreadCacheOwner* owner_ ABSL_GUARDED_BY(mu);
  const std::size_t capacity_;
  std::size_t held_ ABSL_GUARDED_BY(mu) = 0;
  std::atomic<std::uint64_t> allocated_{0};  // written by the owner thread under mu
  std::uint64_t requested_ ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t alloc_count_ ABSL_GUARDED_BY(mu) = 0;
  std::uint64_t free_count_ ABSL_GUARDED_BY(mu) = 0;
  bool retired_ ABSL_GUARDED_BY(mu) = false;
  Bin bins_[kClasses] ABSL_GUARDED_BY(mu);
};

// Where each thread finds its cache for a given pool: a slot in a small per-thread
// table, checked against the pool's serial number (a destroyed pool's slot may be
// reused by a new pool; the serial tells the stale entry apart). Zero-initialized and
// trivially destructible, so the fast path reads it with no guard.
struct ThreadCacheSlot {
  std::uint64_t serial;
  ThreadCache* cache;
};
inline constexpr int kThreadCacheSlots = 64;
extern thread_local constinit ThreadCacheSlot tls_thread_cache_slots[kThreadCacheSlots];

// The thread caches of one pool: creates a thread's cache on its first use, keeps
// every live one reachable for the pool's Stats and Reclaim, and has a thread's cache
// absorbed back into the pool when the thread exits.
//
// Ownership: the pool owns the set; the set and the threads share the caches.
// Lock order: the set's lock, then caches' locks (in registration order), then the
// pool's lock. Thread-safe.
class ThreadCacheSet {
 public:
  // A set for `owner` (which must outlive the set), or null when all
  // kThreadCacheSlots slots are taken by live pools: that pool runs without caches.
  static std::unique_ptr<ThreadCacheSet> Create(ThreadCacheOwner* owner,
                                                std::size_t capacity_per_thread);
  // Every live cache is absorbed into the owner and detached from it: threads that
  // outlive the set send their later frees to the owner's shared lists. The owner's
  // lists must still be usable.
  ~ThreadCacheSet();
  ThreadCacheSet(const ThreadCacheSet&) = delete;
  ThreadCacheSet& operator=(const ThreadCacheSet&) = delete;

  // The calling thread's cache, created on first use; null when the thread is exiting.
  ThreadCache* Mine() {
    if (ThreadCache* cache = MineIfCreated(); cache != nullptr) return cache;
    return Register();
  }
  // The calling thread's cache if it has one already, else null: the hot path, a
  // thread-local load and a compare.
  ABSL_ATTRIBUTE_ALWAYS_INLINE ThreadCache* MineIfCreated() const {
    const ThreadCacheSlot& s = tls_thread_cache_slots[slot_];
    return s.serial == serial_ ? s.cache : nullptr;
  }

  // Moves every live cache's blocks into `held` (memory pressure, Reclaim). The
  // caches' counts stay: those blocks were cached and stay cached.
  void DrainAll(std::vector<Block>* held) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Calls `read(counts)` with the sum of every live cache's counts while the set and
  // all its caches are locked, so that `read` can take the pool's own counters under
  // the pool's lock and get one snapshot consistent with every thread.
  template <typename Read>
  void ReadCounts(Read&& read) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    AllocationCounts sum;
    for (const std::shared_ptr<ThreadCache>& cache : LockAll()) {
      sum += cache->CountsLocked();
    }
    read(sum);
    UnlockAll();
  }
  // Sum of the live caches' allocated contributions, without their locks.
  std::uint64_t AllocatedRelaxed();

 private:
  ThreadCacheSet(ThreadCacheOwner* owner, std::size_t capacity_per_thread, int slot);
  ThreadCache* Register();
  // Locks the set and every live cache (dropping retired ones) and returns them.
  // Pair with UnlockAll.
  const std::vector<std::shared_ptr<ThreadCache>>& LockAll() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  void UnlockAll() ABSL_NO_THREAD_SAFETY_ANALYSIS;

  ThreadCacheOwner* const owner_;
  const std::size_t capacity_;
  const int slot_;
  const std::uint64_t serial_;
  SpinLock mu_;
  std::vector<std::shared_ptr<ThreadCache>> caches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_THREAD_CACHE_H_
