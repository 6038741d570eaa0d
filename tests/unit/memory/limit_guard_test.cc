// LimitGuard alone, and the one thing only a pool can show: cached bytes stay counted
// against the limit until they really went back to the device.
#include "memory/limit_guard.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "memory/host_allocator.h"
#include "memory/pool.h"

namespace ndserve {
namespace {

TEST(LimitGuardTest, RefusesPastTheLimitAndCountsNothingThen) {
  LimitGuard guard(10000);
  ASSERT_TRUE(guard.Reserve(6000).ok());
  ASSERT_TRUE(guard.Reserve(4000).ok());  // exactly at the limit is allowed
  EXPECT_EQ(guard.reserved_bytes(), 10000u);
  const absl::Status refused = guard.Reserve(1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("pool limit of 9.766 KiB reached"), absl::string_view::npos)
      << refused;
  EXPECT_EQ(guard.reserved_bytes(), 10000u);
  guard.Release(4000);
  EXPECT_EQ(guard.reserved_bytes(), 6000u);
  EXPECT_TRUE(guard.Reserve(4000).ok());
  EXPECT_EQ(guard.limit_bytes(), 10000u);
}

TEST(LimitGuardTest, HugeRequestsDoNotWrapAround) {
  LimitGuard guard(1 << 20);
  ASSERT_TRUE(guard.Reserve(1000).ok());
  EXPECT_FALSE(guard.Reserve(~std::uint64_t{0}).ok());
  EXPECT_FALSE(guard.Reserve(~std::uint64_t{0} - 500).ok());
  EXPECT_FALSE(guard.Reserve((1 << 20) + 1).ok());
  EXPECT_EQ(guard.reserved_bytes(), 1000u);
}

TEST(LimitGuardTest, WithoutALimitItOnlyCounts) {
  LimitGuard guard(kNoLimit);
  ASSERT_TRUE(guard.Reserve(std::uint64_t{1} << 47).ok());
  ASSERT_TRUE(guard.Reserve(std::uint64_t{1} << 47).ok());
  EXPECT_EQ(guard.reserved_bytes(), std::uint64_t{1} << 48);
  EXPECT_EQ(guard.limit_bytes(), kNoLimit);
}

TEST(LimitGuardTest, ConcurrentReservationsNeverOvershoot) {
  constexpr std::uint64_t kLimit = 5000;
  LimitGuard guard(kLimit);
  std::atomic<std::uint64_t> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (guard.Reserve(1).ok()) granted.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // 8,000 attempts at one byte each against a 5,000-byte limit: exactly the limit.
  EXPECT_EQ(granted.load(), kLimit);
  EXPECT_EQ(guard.reserved_bytes(), kLimit);
}

TEST(LimitGuardTest, APoolsCachedBytesCountAgainstItsLimit) {
  PoolOptions options;
  options.limit_bytes = 4096;
  options.thread_cache_bytes = 0;
  auto pool = MakePool(PoolKind::kBinned, std::make_unique<HostAllocator>(), options);
  absl::StatusOr<Block> a = pool->Allocate(4096);
  ASSERT_TRUE(a.ok());
  pool->Free(*a);
  PoolStats s = pool->Stats();
  EXPECT_EQ(s.cached_bytes, 4096u);
  EXPECT_EQ(s.reserved_bytes, 4096u);
  // A 2 KiB block does not fit beside the cached 4 KiB one: the pool must give the
  // cached block back first (pressure), and only then may it reserve again.
  absl::StatusOr<Block> b = pool->Allocate(2048);
  ASSERT_TRUE(b.ok()) << b.status();
  s = pool->Stats();
  EXPECT_EQ(s.reclaimed_bytes_pressure, 4096u);
  EXPECT_EQ(s.reserved_bytes, 2048u);
  pool->Free(*b);
}

}  // namespace
}  // namespace ndserve
