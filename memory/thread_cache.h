#ifndef NDSERVE_MEMORY_THREAD_CACHE_H_
#define NDSERVE_MEMORY_THREAD_CACHE_H_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"
#include "memory/block.h"
#include "memory/spin_lock.h"

namespace ndserve {

class Pool;

// One thread's private stash of freed small blocks in front of a power-of-two pool's
// shared free lists (the binned pool's). A pair of allocate+free that stays inside it
// touches only this thread's cache lines, so threads sharing a pool no longer bounce
// the pool lock's line between cores.
//
// Ownership: the blocks it holds belong to the pool (they count as cached), the cache
// object to a ThreadCacheSet and the thread that uses it, jointly.
// Thread-safety: the owning thread takes and puts; any thread may drain it or read its
// counters while holding `mu` (that is how Reclaim and Stats reach idle threads'
// caches). `mu` is uncontended except while such a reader holds it.
//
// Counters are this thread's contribution to the pool's totals since the last fold,
// in modular arithmetic (a thread that frees blocks another thread allocated goes
// "negative"); the pool adds them to its own when it reads or absorbs the cache.
class alignas(64) ThreadCache {
 public:
  static constexpr int kMinShift = 9;   // 512 B, the binned pool's smallest bin
  static constexpr int kClasses = 12;   // 512 B .. 1 MiB
  static constexpr int kDepth = 8;      // blocks kept per class at most
  static constexpr std::size_t kMaxBytes = std::size_t{1} << (kMinShift + kClasses - 1);

  // Size class of a request of 1..kMaxBytes bytes, rounded up as the binned pool does.
  static int ClassOf(std::size_t bytes) {
    return std::max(static_cast<int>(std::bit_width(bytes - 1)), kMinShift) - kMinShift;
  }
  static std::size_t ClassBytes(int c) { return std::size_t{1} << (c + kMinShift); }

  ThreadCache(Pool* pool, std::size_t capacity_bytes) : pool_(pool), capacity_(capacity_bytes) {}

  // Owner thread. A block for `bytes` (1..kMaxBytes) if one of its class is held,
  // else an empty Block.
  ABSL_ATTRIBUTE_ALWAYS_INLINE Block Take(std::size_t bytes) {
    const int c = ClassOf(bytes);
    const std::size_t size = ClassBytes(c);
    SpinLockHolder lock(&mu);
    Bin& bin = bins_[c];
    if (bin.count == 0) return Block{};
    void* ptr = bin.slots[--bin.count];
    held_ -= size;
    allocated_.store(allocated_.load(std::memory_order_relaxed) + size,
                     std::memory_order_relaxed);
    requested_ += bytes;
    ++alloc_count_;
    return Block{ptr, bytes, size, nullptr};
  }

  // Owner thread. Keeps a freed block if its class has room and the byte budget
  // allows; false sends it to the pool's shared lists.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool Put(const Block& block) {
    SpinLockHolder lock(&mu);
    return PutLocked(block);
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
  // requested) and forgets them. Counters are unchanged: a held block is cached
  // both here and in the pool's lists.
  void DrainLocked(std::vector<Block>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  struct Counters {
    std::uint64_t allocated = 0, requested = 0, alloc_count = 0, free_count = 0;
  };
  Counters CountersLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return Counters{allocated_.load(std::memory_order_relaxed), requested_, alloc_count_,
                    free_count_};
  }
  // Returns the counters and zeroes them (the pool took them into its own).
  Counters FoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Allocated-bytes contribution, readable without `mu` (may be a moment old): for
  // the pool's peak, which must not wait for every thread's lock.
  std::uint64_t allocated_relaxed() const { return allocated_.load(std::memory_order_relaxed); }

  // The pool this cache feeds; null once the pool shut its caches down.
  Pool* pool() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return pool_; }
  void Detach() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { pool_ = nullptr; }
  // Its thread is exiting: blocks and counters go back to the pool (if it still has
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

  Pool* pool_ ABSL_GUARDED_BY(mu);
  const std::size_t capacity_;
  std::size_t held_ ABSL_GUARDED_BY(mu) = 0;
  std::atomic<std::uint64_t> allocated_{0};  // written by the owner under mu
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
// every live one reachable for the pool's Stats and Reclaim, and absorbs a thread's
// cache back into the pool when the thread exits.
//
// Lock order: the set's lock, then caches' locks (in registration order), then the
// pool's lock. Thread-safe.
class ThreadCacheSet {
 public:
  // A set for `pool` (which must outlive the set's Shutdown()), or null when all
  // kThreadCacheSlots slots are taken by live pools: that pool runs without caches.
  static std::unique_ptr<ThreadCacheSet> Create(Pool* pool, std::size_t capacity_per_thread);
  ~ThreadCacheSet();
  ThreadCacheSet(const ThreadCacheSet&) = delete;
  ThreadCacheSet& operator=(const ThreadCacheSet&) = delete;

  // The calling thread's cache, created on first use; null when caching is off or
  // the thread is exiting.
  ABSL_ATTRIBUTE_ALWAYS_INLINE ThreadCache* Mine() {
    const ThreadCacheSlot& s = tls_thread_cache_slots[slot_];
    if (s.serial == serial_) return s.cache;
    return Register();
  }

  // Locks the set and every live cache (dropping retired ones) and returns them, so
  // that the pool can read or drain them all in one consistent step. Pair with
  // UnlockAll.
  const std::vector<std::shared_ptr<ThreadCache>>& LockAll() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  void UnlockAll() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Sum of the live caches' allocated contributions, without their locks.
  std::uint64_t AllocatedRelaxed();
 private:
  // Detaches every cache from the pool (their threads fall back to the pool's lists,
  // which are about to go away with it); the destructor's job. The pool drained them
  // first.
  void Shutdown();

  ThreadCacheSet(Pool* pool, std::size_t capacity_per_thread, int slot);
  ThreadCache* Register();

  Pool* const pool_;
  const std::size_t capacity_;
  const int slot_;
  const std::uint64_t serial_;
  SpinLock mu_;
  std::vector<std::shared_ptr<ThreadCache>> caches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_THREAD_CACHE_H_
