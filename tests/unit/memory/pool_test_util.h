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
