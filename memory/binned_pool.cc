#include "memory/binned_pool.h"

#include "absl/container/inlined_vector.h"

namespace ndserve {

BinnedPool::BinnedPool(std::unique_ptr<DeviceAllocator> allocator, PoolOptions options)
    : Pool(PoolKind::kBinned, std::move(allocator), options) {
  // At debug levels 1-2 every block is recorded by address under the leak tracker's
  // lock; keeping that exact through thread caches would put the lock back on their
  // path, and at those levels speed is not the point.
  if (options.thread_cache_bytes > 0 && options.debug_level == 0) {
    caches_ = ThreadCacheSet::Create(this, options.thread_cache_bytes);
  }
  if (caches_ != nullptr) DeclareFrontLayer();
}

BinnedPool::~BinnedPool() {
  // Every thread's cached blocks come back first, and later frees from those threads
  // skip their caches; then the lists go back to the device.
  caches_.reset();
  ReleaseAllCached();
}

std::size_t BinnedPool::RoundedSize(std::size_t bytes) {
  if (bytes > kMaxBinned) return RoundUp(bytes, DeviceAllocator::kAlignment);
  return SizeClasses::RoundUp(bytes);
}

// The thread-cache hit is the hot path: a few dozen instructions and no shared lock;
// everything past a miss is out of line, so the hit saves next to no registers. No leak
// bookkeeping: caches exist only at debug level 0.
absl::StatusOr<Block> BinnedPool::AllocateBlock(std::size_t bytes, absl::string_view owner) {
  if (ThreadCache* cache = CacheFor(bytes); cache != nullptr) {
    if (Block block = cache->TryTake(bytes); !block.empty()) return block;
  } else if (caches_ == nullptr) {
    return Pool::AllocateBlock(bytes, owner);
  }
  return AllocateMissed(bytes, owner);
}

absl::StatusOr<Block> BinnedPool::AllocateMissed(std::size_t bytes, absl::string_view owner) {
  // A thread's first request of a cacheable size creates its cache, which is empty
  // yet: this request still goes to the lists.
  if (Cacheable(bytes) && caches_->MineIfCreated() == nullptr) caches_->Mine();
  return Pool::AllocateBlock(bytes, owner);
}

void BinnedPool::FreeBlock(const Block& block) {
  if (ThreadCache* cache = CacheFor(block.size); cache != nullptr) {
    if (cache->TryPut(block)) return;
  } else if (caches_ == nullptr) {
    return Pool::FreeBlock(block);
  }
  FreeMissed(block);
}

void BinnedPool::FreeMissed(const Block& block) {
  // A thread that frees before it ever allocated (a consumer of another thread's
  // blocks) creates its cache here.
  if (Cacheable(block.size) && caches_->MineIfCreated() == nullptr) {
    if (ThreadCache* cache = caches_->Mine(); cache != nullptr && cache->TryPut(block)) return;
  }
  Pool::FreeBlock(block);
}

void BinnedPool::FreeBlocks(absl::Span<const Block> blocks) {
  ThreadCache* cache = caches_ != nullptr ? caches_->Mine() : nullptr;
  if (cache == nullptr) {
    Pool::FreeBlocks(blocks);
    return;
  }
  absl::InlinedVector<const Block*, 16> rest;
  {
    SpinLockHolder lock(&cache->mu);
    for (const Block& b : blocks) {
      if (!b.empty() && !cache->PutLocked(b)) rest.push_back(&b);
    }
  }
  FreeToLists(rest);
}

void BinnedPool::FlushFront() {
  if (caches_ == nullptr) return;  // shut down already (the destructor's Reclaim)
  std::vector<Block> held;
  caches_->DrainAll(&held);
  // Counts stay: a held block was cached in the thread's view and stays cached.
  SpinLockHolder lock(&mu_);
  PushHeld(held);
}

std::uint64_t BinnedPool::FrontAllocatedBytes() const {
  return caches_ != nullptr ? caches_->AllocatedRelaxed() : 0;
}

void BinnedPool::AbsorbThreadCache(ThreadCache& cache) {
  std::vector<Block> held;
  cache.DrainLocked(&held);
  const AllocationCounts counts = cache.FoldLocked();
  SpinLockHolder lock(&mu_);
  PushHeld(held);
  AbsorbFrontCounts(counts);
}

PoolStats BinnedPool::Stats() const {
  if (caches_ == nullptr) return Pool::Stats();
  // Every thread cache and then the shared lists, all held at once: one consistent
  // snapshot even while threads allocate.
  PoolStats s;
  caches_->ReadCounts([&](const AllocationCounts& front) { s = StatsWith(front); });
  return s;
}

void BinnedPool::PushHeld(const std::vector<Block>& held) {
  for (const Block& b : held) bins_[SizeClasses::Of(b.size)].push_back(b.ptr);
}

std::size_t BinnedPool::DoSegmentSize(std::size_t bytes) const { return RoundedSize(bytes); }

Block BinnedPool::DoTakeCached(std::size_t bytes) {
  const std::size_t rounded = RoundedSize(bytes);
  if (rounded > kMaxBinned) return Block{};
  std::vector<void*>& bin = bins_[SizeClasses::Of(rounded)];
  if (bin.empty()) return Block{};
  void* ptr = bin.back();
  bin.pop_back();
  return Block{ptr, bytes, rounded, nullptr};
}

Block BinnedPool::DoAdoptSegment(Segment segment, std::size_t bytes) {
  return Block{segment.ptr, bytes, segment.bytes, nullptr};
}

Pool::Segment BinnedPool::DoReturn(const Block& block) {
  if (block.size > kMaxBinned) return Segment{block.ptr, block.size};
  bins_[SizeClasses::Of(block.size)].push_back(block.ptr);
  return Segment{nullptr, 0};
}

void BinnedPool::DoCollectReclaimable(std::uint64_t target, std::vector<Segment>* out) {
  std::uint64_t collected = 0;
  for (int c = SizeClasses::kCount - 1; c >= 0; --c) {
    const std::size_t size = SizeClasses::Bytes(c);
    std::vector<void*>& bin = bins_[c];
    while (!bin.empty()) {
      if (target != 0 && collected >= target) return;
      out->push_back(Segment{bin.back(), size});
      bin.pop_back();
      collected += size;
    }
    if (bin.capacity() > 0 && bin.empty()) bin.shrink_to_fit();
  }
}

bool BinnedPool::DoLayout(std::vector<LayoutSegment>* out) const {
  // Every block is its own segment: a cached one sits on its class's list (Layout
  // flushed the thread caches into them); live ones are the caller's (see PoolLayout).
  for (int c = 0; c < SizeClasses::kCount; ++c) {
    const std::size_t size = SizeClasses::Bytes(c);
    for (void* ptr : bins_[c]) {
      out->push_back(LayoutSegment{reinterpret_cast<std::uintptr_t>(ptr), size,
                                   {LayoutBlock{0, size, BlockState::kCached, 0}}});
    }
  }
  return false;
}

}  // namespace ndserve
