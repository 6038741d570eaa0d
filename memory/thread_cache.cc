#include "memory/thread_cache.h"

namespace ndserve {

thread_local constinit ThreadCacheSlot tls_thread_cache_slots[kThreadCacheSlots] = {};

namespace {

// Set while a thread runs its thread_local destructors: its caches are gone, so any
// late Free (from another thread_local's destructor) goes to the shared lists.
thread_local constinit bool tls_exiting = false;

// Keeps a thread's caches alive for as long as the thread may use them, and hands
// them back to their pools when the thread exits. Touched only on the slow path.
struct ThreadCacheHolder {
  std::shared_ptr<ThreadCache> by_slot[kThreadCacheSlots];

  ~ThreadCacheHolder() {
    tls_exiting = true;
    for (int k = 0; k < kThreadCacheSlots; ++k) {
      tls_thread_cache_slots[k] = ThreadCacheSlot{0, nullptr};
      ThreadCache* cache = by_slot[k].get();
      if (cache == nullptr) continue;
      SpinLockHolder lock(&cache->mu);
      cache->RetireLocked();
    }
  }
};
thread_local ThreadCacheHolder tls_holder;

// Slots of the per-thread table, one per pool with caches; serials never repeat.
SpinLock slot_mu;
bool slot_used[kThreadCacheSlots] ABSL_GUARDED_BY(slot_mu) = {};
std::atomic<std::uint64_t> next_serial{1};

int ClaimSlot() {
  SpinLockHolder lock(&slot_mu);
  for (int k = 0; k < kThreadCacheSlots; ++k) {
    if (!slot_used[k]) {
      slot_used[k] = true;
      return k;
    }
  }
  return -1;
}

void ReleaseSlot(int k) {
  if (k < 0) return;
  SpinLockHolder lock(&slot_mu);
  slot_used[k] = false;
}

}  // namespace

void ThreadCache::DrainLocked(std::vector<Block>* out) {
  for (int c = 0; c < kClasses; ++c) {
    Bin& bin = bins_[c];
    for (std::uint32_t i = 0; i < bin.count; ++i) {
      out->push_back(Block{bin.slots[i], 0, ClassBytes(c), nullptr});
    }
    bin.count = 0;
  }
  held_ = 0;
}

void ThreadCache::RetireLocked() {
  // The owner cannot go away meanwhile: its ThreadCacheSet's destructor takes every
  // cache's lock to detach it, and we hold this one.
  if (owner_ != nullptr) owner_->AbsorbThreadCache(*this);
  retired_ = true;
}

AllocationCounts ThreadCache::FoldLocked() {
  AllocationCounts c = CountsLocked();
  allocated_.store(0, std::memory_order_relaxed);
  requested_ = alloc_count_ = free_count_ = 0;
  return c;
}

std::unique_ptr<ThreadCacheSet> ThreadCacheSet::Create(ThreadCacheOwner* owner,
                                                       std::size_t capacity_per_thread) {
  const int slot = ClaimSlot();
  if (slot < 0) return nullptr;
  return std::unique_ptr<ThreadCacheSet>(new ThreadCacheSet(owner, capacity_per_thread, slot));
}

ThreadCacheSet::ThreadCacheSet(ThreadCacheOwner* owner, std::size_t capacity_per_thread, int slot)
    : owner_(owner),
      capacity_(capacity_per_thread),
      slot_(slot),
      serial_(next_serial.fetch_add(1, std::memory_order_relaxed)) {}

ThreadCacheSet::~ThreadCacheSet() {
  for (const std::shared_ptr<ThreadCache>& cache : LockAll()) {
    owner_->AbsorbThreadCache(*cache);
    // Its thread may live on; it must not hand the cache to a pool that is gone.
    cache->Detach();
  }
  UnlockAll();
  ReleaseSlot(slot_);
}

ThreadCache* ThreadCacheSet::Register() {
  if (tls_exiting) return nullptr;
  auto cache = std::make_shared<ThreadCache>(owner_, capacity_);
  {
    SpinLockHolder lock(&mu_);
    caches_.push_back(cache);
  }
  // Replaces a cache of a destroyed pool that had this slot (already detached).
  tls_holder.by_slot[slot_] = cache;
  tls_thread_cache_slots[slot_] = ThreadCacheSlot{serial_, cache.get()};
  return cache.get();
}

const std::vector<std::shared_ptr<ThreadCache>>& ThreadCacheSet::LockAll() {
  mu_.Lock();
  std::vector<std::shared_ptr<ThreadCache>> live;
  live.reserve(caches_.size());
  for (std::shared_ptr<ThreadCache>& cache : caches_) {
    cache->mu.Lock();
    if (cache->retired()) {
      cache->mu.Unlock();
    } else {
      live.push_back(std::move(cache));
    }
  }
  caches_.swap(live);
  return caches_;
}

void ThreadCacheSet::UnlockAll() {
  for (const std::shared_ptr<ThreadCache>& cache : caches_) cache->mu.Unlock();
  mu_.Unlock();
}

void ThreadCacheSet::DrainAll(std::vector<Block>* held) {
  for (const std::shared_ptr<ThreadCache>& cache : LockAll()) cache->DrainLocked(held);
  UnlockAll();
}

std::uint64_t ThreadCacheSet::AllocatedRelaxed() {
  SpinLockHolder lock(&mu_);
  std::uint64_t sum = 0;
  for (const std::shared_ptr<ThreadCache>& cache : caches_) sum += cache->allocated_relaxed();
  return sum;
}

}  // namespace ndserve
