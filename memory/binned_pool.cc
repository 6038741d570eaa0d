#include "memory/binned_pool.h"

#include <bit>

namespace ndserve {

BinnedPool::BinnedPool(std::unique_ptr<DeviceAllocator> allocator, PoolOptions options)
    : Pool(PoolKind::kBinned, std::move(allocator), options) {
  if (options.thread_cache_bytes > 0) EnableThreadCaches();
}

BinnedPool::~BinnedPool() {
  ShutdownThreadCaches();
  ReleaseAllCached();
}

std::size_t BinnedPool::RoundedSize(std::size_t bytes) {
  if (bytes > kMaxBinned) return RoundUp(bytes, DeviceAllocator::kAlignment);
  return std::max(std::bit_ceil(bytes), std::size_t{1} << kMinShift);
}

int BinnedPool::BinOf(std::size_t rounded) { return std::countr_zero(rounded) - kMinShift; }

std::size_t BinnedPool::DoSegmentSize(std::size_t bytes) const { return RoundedSize(bytes); }

Block BinnedPool::DoTakeCached(std::size_t bytes) {
  const std::size_t rounded = RoundedSize(bytes);
  if (rounded > kMaxBinned) return Block{};
  std::vector<void*>& bin = bins_[BinOf(rounded)];
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
  bins_[BinOf(block.size)].push_back(block.ptr);
  return Segment{nullptr, 0};
}

void BinnedPool::DoCollectReclaimable(std::uint64_t target, std::vector<Segment>* out) {
  std::uint64_t collected = 0;
  for (int b = kBins - 1; b >= 0; --b) {
    const std::size_t size = std::size_t{1} << (b + kMinShift);
    std::vector<void*>& bin = bins_[b];
    while (!bin.empty()) {
      if (target != 0 && collected >= target) return;
      out->push_back(Segment{bin.back(), size});
      bin.pop_back();
      collected += size;
    }
    if (bin.capacity() > 0 && bin.empty()) bin.shrink_to_fit();
  }
}

}  // namespace ndserve
