#ifndef NDSERVE_MEMORY_NONE_POOL_H_
#define NDSERVE_MEMORY_NONE_POOL_H_

#include <vector>

#include "memory/pool.h"

namespace ndserve {

// No caching: every allocation goes to the device and every free straight back. The
// reference point the caching pools are measured against, and the right choice when
// another process must see memory back the moment it is freed.
// Ownership and threading as Pool.
class NonePool final : public Pool {
 public:
  NonePool(std::unique_ptr<DeviceAllocator> allocator, PoolOptions options);

 private:
  Block DoTakeCached(std::size_t) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return {}; }
  std::size_t DoSegmentSize(std::size_t bytes) const override {
    return RoundUp(bytes, DeviceAllocator::kAlignment);
  }
  Block DoAdoptSegment(Segment segment, std::size_t bytes) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return Block{segment.ptr, bytes, segment.bytes, nullptr};
  }
  Segment DoReturn(const Block& block) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return Segment{block.ptr, block.size};
  }
  void DoCollectReclaimable(std::uint64_t, std::vector<Segment>*) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {}
  // Nothing is ever cached, and live blocks are the caller's (see PoolLayout).
  bool DoLayout(std::vector<LayoutSegment>*) const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return false;
  }
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_NONE_POOL_H_
