#include "memory/simple_pool.h"

#include <algorithm>

namespace ndserve {

SimplePool::SimplePool(std::unique_ptr<DeviceAllocator> allocator, PoolOptions options)
    : Pool(PoolKind::kSimple, std::move(allocator), options) {}

SimplePool::~SimplePool() { ReleaseAllCached(); }

std::size_t SimplePool::DoSegmentSize(std::size_t bytes) const {
  return RoundUp(bytes, kGranule);
}

Block SimplePool::DoTakeCached(std::size_t bytes) {
  const std::size_t want = RoundUp(bytes, kGranule);
  for (std::size_t i = 0; i < cache_.size(); ++i) {
    const Segment s = cache_[i];
    if (s.bytes >= want && s.bytes <= want * kMaxOversize) {
      cache_[i] = cache_.back();
      cache_.pop_back();
      return Block{s.ptr, bytes, s.bytes, nullptr};
    }
  }
  return Block{};
}

Block SimplePool::DoAdoptSegment(Segment segment, std::size_t bytes) {
  return Block{segment.ptr, bytes, segment.bytes, nullptr};
}

Pool::Segment SimplePool::DoReturn(const Block& block) {
  cache_.push_back(Segment{block.ptr, block.size});
  return Segment{nullptr, 0};
}

void SimplePool::DoCollectReclaimable(std::uint64_t target, std::vector<Segment>* out) {
  std::sort(cache_.begin(), cache_.end(),
            [](const Segment& a, const Segment& b) { return a.bytes < b.bytes; });
  std::uint64_t collected = 0;
  while (!cache_.empty() && (target == 0 || collected < target)) {
    out->push_back(cache_.back());
    collected += cache_.back().bytes;
    cache_.pop_back();
  }
}

bool SimplePool::DoLayout(std::vector<LayoutSegment>* out) const {
  // Each cached entry is a whole segment; live ones are the caller's (see PoolLayout).
  for (const Segment& s : cache_) {
    out->push_back(LayoutSegment{reinterpret_cast<std::uintptr_t>(s.ptr), s.bytes,
                                 {LayoutBlock{0, s.bytes, BlockState::kCached, 0}}});
  }
  return false;
}

}  // namespace ndserve
