#ifndef NDSERVE_TESTS_UNIT_MEMORY_POOL_TEST_UTIL_H_
#define NDSERVE_TESTS_UNIT_MEMORY_POOL_TEST_UTIL_H_

#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "memory/pool.h"

namespace ndserve {

template <PoolKind K>
using PoolKindTag = std::integral_constant<PoolKind, K>;

using AllPoolKinds = ::testing::Types<PoolKindTag<PoolKind::kBinned>, PoolKindTag<PoolKind::kSplit>,
                                      PoolKindTag<PoolKind::kSimple>, PoolKindTag<PoolKind::kNone>>;

struct PoolKindNames {
  template <typename T>
  static std::string GetName(int) {
    return std::string(PoolKindName(T::value));
  }
};

// A pool kind over host memory reporting `device`: cpu:0, or cuda_host:0, where the
// host allocator stands in for the pinned-host one (docs/design.md §4.3) so that the
// conformance suite covers that pool on machines without a GPU.
template <PoolKind K, DeviceKind D>
struct PoolOnHost : PoolKindTag<K> {
  static Device device() { return Device{D, 0}; }
};

using AllPoolKindsOnHost =
    ::testing::Types<PoolOnHost<PoolKind::kBinned, DeviceKind::kCpu>,
                     PoolOnHost<PoolKind::kSplit, DeviceKind::kCpu>,
                     PoolOnHost<PoolKind::kSimple, DeviceKind::kCpu>,
                     PoolOnHost<PoolKind::kNone, DeviceKind::kCpu>,
                     PoolOnHost<PoolKind::kBinned, DeviceKind::kCudaHost>,
                     PoolOnHost<PoolKind::kSplit, DeviceKind::kCudaHost>,
                     PoolOnHost<PoolKind::kSimple, DeviceKind::kCudaHost>,
                     PoolOnHost<PoolKind::kNone, DeviceKind::kCudaHost>>;

struct PoolOnHostNames {
  template <typename T>
  static std::string GetName(int) {
    return absl::StrCat(PoolKindName(T::value), T::device().is_cuda_host() ? "_pinned" : "");
  }
};

// The accounting identities every pool keeps at every quiescent moment.
inline void ExpectConsistent(const Pool& pool, const std::vector<Block>& live) {
  const PoolStats s = pool.Stats();
  std::uint64_t requested = 0, rounded = 0;
  for (const Block& b : live) {
    requested += b.requested;
    rounded += b.size;
  }
  EXPECT_EQ(s.requested_bytes, requested);
  EXPECT_EQ(s.allocated_bytes, rounded);
  EXPECT_EQ(s.outstanding_allocations, live.size());
  EXPECT_EQ(s.allocated_bytes + s.cached_bytes, s.reserved_bytes);
  EXPECT_LE(s.reserved_bytes, s.limit_bytes);
  EXPECT_LE(s.inactive_split_bytes, s.cached_bytes);
}

}  // namespace ndserve

#endif  // NDSERVE_TESTS_UNIT_MEMORY_POOL_TEST_UTIL_H_
