#ifndef NDSERVE_MEMORY_SIMPLE_POOL_H_
#define NDSERVE_MEMORY_SIMPLE_POOL_H_

#include <vector>

#include "memory/pool.h"

namespace ndserve {

// One cache list, first fit. A cached block is reused only if it is at most twice the
// (512-byte rounded) request, so a small request never pins a huge block. Meant as the
// easy-to-reason-about baseline; allocation is O(cached blocks).
// Ownership and threading as Pool.
class SimplePool final : public Pool {
 public:
  static constexpr std::size_t kGranule = 512;
  static constexpr std::size_t kMaxOversize = 2;  // reuse blocks up to 2x the request

  SimplePool(std::unique_ptr<DeviceAllocator> allocator, PoolOptions options);
  ~SimplePool() override;

 private:
  Block DoTakeCached(std::size_t bytes) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::size_t DoSegmentSize(std::size_t bytes) const override;
  Block DoAdoptSegment(Segment segment, std::size_t bytes) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Segment DoReturn(const Block& block) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DoCollectReclaimable(std::uint64_t target, std::vector<Segment>* out) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DoLayout(std::vector<LayoutSegment>* out) const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::vector<Segment> cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_SIMPLE_POOL_H_
