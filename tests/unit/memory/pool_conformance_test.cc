// The conformance suite every pool kind passes, over the host allocator as cpu:0 and as
// the pinned-host stand-in cuda_host:0 (and, in tests/gpu/, over the CUDA and
// cudaHostAlloc allocators when a device is present). Pool-specific
// behaviour (binned rounding, split's segments) has its own files.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "memory/host_allocator.h"
#include "memory/pool.h"
#include "tests/unit/memory/pool_test_util.h"

namespace ndserve {
namespace {

template <typename Kind>
class PoolConformanceTest : public ::testing::Test {
 protected:
  static constexpr PoolKind kKind = Kind::value;

  // A pool over a host "device" of `capacity` bytes with an optional limit.
  std::unique_ptr<Pool> Make(std::uint64_t limit = kNoLimit,
                             std::optional<std::uint64_t> capacity = std::nullopt) {
    auto allocator = std::make_unique<HostAllocator>(capacity, Kind::device());
    host_ = allocator.get();
    PoolOptions options;
    options.limit_bytes = limit;
    return MakePool(kKind, std::move(allocator), options);
  }

  HostAllocator* host_ = nullptr;
};

TYPED_TEST_SUITE(PoolConformanceTest, AllPoolKindsOnHost, PoolOnHostNames);

TYPED_TEST(PoolConformanceTest, KindAndNameMatch) {
  auto pool = this->Make();
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->kind(), this->kKind);
  EXPECT_EQ(pool->name(), PoolKindName(this->kKind));
  EXPECT_EQ(pool->device(), TypeParam::device());
}

TYPED_TEST(PoolConformanceTest, BlocksAreAlignedAndUsable) {
  auto pool = this->Make();
  std::vector<Block> blocks;
  for (std::size_t bytes : {1ul, 3ul, 255ul, 256ul, 257ul, 1000ul, 4096ul, 65537ul, 1ul << 20,
                            (3ul << 20) + 5}) {
    absl::StatusOr<Block> b = pool->Allocate(bytes);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->ptr) % DeviceAllocator::kAlignment, 0u)
        << bytes;
    EXPECT_EQ(b->requested, bytes);
    EXPECT_GE(b->size, bytes);
    std::memset(b->ptr, 0xAB, bytes);  // ASan catches a block shorter than promised
    blocks.push_back(*b);
  }
  // No two live blocks overlap.
  std::sort(blocks.begin(), blocks.end(),
            [](const Block& a, const Block& b) { return a.ptr < b.ptr; });
  for (std::size_t i = 1; i < blocks.size(); ++i) {
    EXPECT_LE(static_cast<char*>(blocks[i - 1].ptr) + blocks[i - 1].size,
              static_cast<char*>(blocks[i].ptr));
  }
  for (const Block& b : blocks) pool->Free(b);
  EXPECT_EQ(pool->Stats().allocated_bytes, 0u);
  EXPECT_EQ(pool->Stats().outstanding_allocations, 0u);
}

TYPED_TEST(PoolConformanceTest, FreeAllReturnsEveryBlock) {
  auto pool = this->Make();
  std::vector<Block> blocks;
  for (std::size_t bytes : {0ul, 100ul, 5000ul, 70000ul, 3ul << 20}) {
    absl::StatusOr<Block> b = pool->Allocate(bytes);
    ASSERT_TRUE(b.ok());
    blocks.push_back(*b);
  }
  pool->FreeAll(blocks);
  const PoolStats s = pool->Stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.outstanding_allocations, 0u);
  EXPECT_EQ(s.free_count, s.alloc_count);
  EXPECT_EQ(s.cached_bytes, s.reserved_bytes);
  pool->Reclaim();
  EXPECT_EQ(this->host_->in_use(), 0u);
}

TYPED_TEST(PoolConformanceTest, ZeroSizeIsEmptyAndFreeable) {
  auto pool = this->Make();
  absl::StatusOr<Block> b = pool->Allocate(0);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->empty());
  pool->Free(*b);
  const PoolStats s = pool->Stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  EXPECT_EQ(s.outstanding_allocations, 0u);
}

TYPED_TEST(PoolConformanceTest, FreedBlockIsReused) {
  auto pool = this->Make();
  absl::StatusOr<Block> a = pool->Allocate(10000);
  ASSERT_TRUE(a.ok());
  pool->Free(*a);
  const std::uint64_t device_allocs = pool->Stats().device_allocs;
  absl::StatusOr<Block> b = pool->Allocate(10000);
  ASSERT_TRUE(b.ok());
  const PoolStats s = pool->Stats();
  if (this->kKind == PoolKind::kNone) {
    EXPECT_EQ(s.device_allocs, device_allocs + 1);  // no cache: every allocation is new
    EXPECT_EQ(s.cache_hits, 0u);
  } else {
    EXPECT_EQ(b->ptr, a->ptr);
    EXPECT_EQ(s.device_allocs, device_allocs);
    EXPECT_EQ(s.cache_hits, 1u);
  }
  pool->Free(*b);
}

TYPED_TEST(PoolConformanceTest, StatsAddUp) {
  auto pool = this->Make(512ul << 20);
  std::mt19937 rng(7);
  std::vector<Block> live;
  for (int i = 0; i < 2000; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      std::size_t k = rng() % live.size();
      pool->Free(live[k]);
      live[k] = live.back();
      live.pop_back();
    } else {
      absl::StatusOr<Block> b = pool->Allocate(1 + rng() % (256 * 1024));
      ASSERT_TRUE(b.ok()) << b.status();
      live.push_back(*b);
    }
    if (i % 100 == 0) ExpectConsistent(*pool, live);
  }
  ExpectConsistent(*pool, live);
  const PoolStats s = pool->Stats();
  EXPECT_EQ(s.cache_hits + s.cache_misses, s.alloc_count);
  EXPECT_GE(s.peak_allocated_bytes, s.allocated_bytes);
  for (const Block& b : live) pool->Free(b);
  EXPECT_EQ(pool->Stats().allocated_bytes, 0u);
  EXPECT_EQ(pool->Stats().requested_bytes, 0u);
}

TYPED_TEST(PoolConformanceTest, LimitIsNeverExceeded) {
  constexpr std::uint64_t kLimit = 48ul << 20;
  auto pool = this->Make(kLimit);
  std::vector<Block> live;
  std::mt19937 rng(11);
  int failures = 0;
  for (int i = 0; i < 400; ++i) {
    absl::StatusOr<Block> b = pool->Allocate(1 + rng() % (2ul << 20));
    const PoolStats s = pool->Stats();
    EXPECT_LE(s.reserved_bytes, kLimit);
    if (b.ok()) {
      live.push_back(*b);
    } else {
      EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
      ++failures;
      // Make room so the loop keeps exercising the edge.
      for (int k = 0; k < 4 && !live.empty(); ++k) {
        pool->Free(live.back());
        live.pop_back();
      }
    }
  }
  EXPECT_GT(failures, 0) << "the test never reached the limit";
  EXPECT_LE(this->host_->in_use(), kLimit);
  for (const Block& b : live) pool->Free(b);
}

TYPED_TEST(PoolConformanceTest, OutOfMemoryIsAnErrorAndThePoolRecovers) {
  constexpr std::uint64_t kLimit = 8ul << 20;
  auto pool = this->Make(kLimit);
  absl::StatusOr<Block> too_big = pool->Allocate(kLimit + 1);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  // The message carries the memory status paragraph.
  EXPECT_NE(too_big.status().message().find("reserved"), absl::string_view::npos)
      << too_big.status();
  EXPECT_EQ(pool->Stats().oom_count, 1u);

  // Fill the pool, fail, free, succeed.
  std::vector<Block> live;
  for (;;) {
    absl::StatusOr<Block> b = pool->Allocate(512 * 1024);
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
      break;
    }
    live.push_back(*b);
    ASSERT_LT(live.size(), 1000u);
  }
  EXPECT_FALSE(live.empty());
  EXPECT_EQ(pool->Stats().oom_count, 2u);
  for (const Block& b : live) pool->Free(b);
  absl::StatusOr<Block> again = pool->Allocate(4ul << 20);
  ASSERT_TRUE(again.ok()) << again.status();
  pool->Free(*again);
}

TYPED_TEST(PoolConformanceTest, AbsurdSizesAreOutOfMemoryNotOverflow) {
  auto pool = this->Make();
  for (std::size_t bytes : {std::numeric_limits<std::size_t>::max(),
                            std::numeric_limits<std::size_t>::max() - 100,
                            std::size_t{1} << 63, (std::size_t{1} << 48) + 1}) {
    absl::StatusOr<Block> b = pool->Allocate(bytes);
    ASSERT_FALSE(b.ok()) << bytes;
    EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted) << bytes;
  }
  EXPECT_EQ(pool->Stats().reserved_bytes, 0u);
  EXPECT_EQ(pool->Stats().oom_count, 4u);
  absl::StatusOr<Block> ok = pool->Allocate(100);
  ASSERT_TRUE(ok.ok());
  pool->Free(*ok);
}

TYPED_TEST(PoolConformanceTest, PressureReclaimsCacheBeforeFailing) {
  // Cached blocks of one size must not starve a request of another size: the pool
  // gives its cache back to the device and retries before reporting OOM.
  constexpr std::uint64_t kLimit = 8ul << 20;
  auto pool = this->Make(kLimit);
  std::vector<Block> small;
  for (int i = 0; i < 12; ++i) {
    absl::StatusOr<Block> b = pool->Allocate(300 * 1024);
    ASSERT_TRUE(b.ok()) << b.status();
    small.push_back(*b);
  }
  for (const Block& b : small) pool->Free(b);
  absl::StatusOr<Block> big = pool->Allocate(6ul << 20);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(pool->Stats().oom_count, 0u);
  if (this->kKind != PoolKind::kNone) {
    EXPECT_GT(pool->Stats().reclaimed_bytes_pressure, 0u);
  }
  pool->Free(*big);
}

TYPED_TEST(PoolConformanceTest, DeviceFullEscalatesToHooks) {
  // The device itself (not the limit) is full; an engine cache holds a block. The
  // pool asks the hook, which frees it, and the retry succeeds.
  auto pool = this->Make(kNoLimit, /*capacity=*/4ul << 20);
  absl::StatusOr<Block> held = pool->Allocate(3ul << 20);
  ASSERT_TRUE(held.ok()) << held.status();
  bool hook_called = false;
  pool->AddReclaimHook([&](std::uint64_t) -> std::uint64_t {
    hook_called = true;
    if (held->empty()) return 0;
    pool->Free(*held);
    const std::uint64_t freed = held->size;
    *held = Block{};
    return freed;
  });
  absl::StatusOr<Block> b = pool->Allocate(3ul << 20);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(hook_called);
  pool->Free(*b);
  // With the hook exhausted, a request the device cannot hold is an OOM, not a crash.
  absl::StatusOr<Block> huge = pool->Allocate(5ul << 20);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
}

TYPED_TEST(PoolConformanceTest, ReclaimReturnsCachedBytesToTheDevice) {
  auto pool = this->Make();
  std::vector<Block> blocks;
  for (std::size_t bytes : {4096ul, 70000ul, 1ul << 20, 3ul << 20}) {
    absl::StatusOr<Block> b = pool->Allocate(bytes);
    ASSERT_TRUE(b.ok());
    blocks.push_back(*b);
  }
  for (const Block& b : blocks) pool->Free(b);
  const PoolStats before = pool->Stats();
  EXPECT_EQ(before.allocated_bytes, 0u);
  const std::uint64_t released = pool->Reclaim();
  const PoolStats after = pool->Stats();
  EXPECT_EQ(released, before.cached_bytes);
  EXPECT_EQ(after.cached_bytes, 0u);
  EXPECT_EQ(after.reserved_bytes, 0u);
  EXPECT_EQ(this->host_->in_use(), 0u);
  EXPECT_EQ(after.reclaimed_bytes_admin, released);
  EXPECT_EQ(after.device_allocs, after.device_frees);
}

TYPED_TEST(PoolConformanceTest, ReclaimWithTargetStopsEarly) {
  auto pool = this->Make();
  std::vector<Block> blocks;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<Block> b = pool->Allocate(3ul << 20);  // one segment or bin each
    ASSERT_TRUE(b.ok());
    blocks.push_back(*b);
  }
  for (const Block& b : blocks) pool->Free(b);
  const std::uint64_t cached = pool->Stats().cached_bytes;
  const std::uint64_t released = pool->Reclaim(1);
  if (this->kKind == PoolKind::kNone) {
    EXPECT_EQ(released, 0u);
  } else {
    EXPECT_GT(released, 0u);
    EXPECT_LT(released, cached);
    EXPECT_EQ(pool->Stats().cached_bytes, cached - released);
  }
}

TYPED_TEST(PoolConformanceTest, ConcurrentAllocFreeLosesNothing) {
  auto pool = this->Make(256ul << 20);
  constexpr int kThreads = 4;
  constexpr int kIters = 3000;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      std::vector<std::pair<Block, std::uint8_t>> live;
      for (int i = 0; i < kIters; ++i) {
        if (!live.empty() && (rng() % 2 == 0 || live.size() > 64)) {
          std::size_t k = rng() % live.size();
          auto [b, tag] = live[k];
          // A block handed to two owners at once would have been overwritten.
          const auto* p = static_cast<const std::uint8_t*>(b.ptr);
          if (p[0] != tag || p[b.requested - 1] != tag) errors.fetch_add(1);
          pool->Free(b);
          live[k] = live.back();
          live.pop_back();
        } else {
          absl::StatusOr<Block> b = pool->Allocate(1 + rng() % (300 * 1024));
          if (!b.ok()) {
            errors.fetch_add(1);
            continue;
          }
          const std::uint8_t tag = static_cast<std::uint8_t>(rng());
          std::memset(b->ptr, tag, b->requested);
          live.emplace_back(*b, tag);
        }
      }
      for (auto& [b, tag] : live) pool->Free(b);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  const PoolStats s = pool->Stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.outstanding_allocations, 0u);
  EXPECT_EQ(s.alloc_count, s.free_count);
  EXPECT_EQ(s.cached_bytes, s.reserved_bytes);
  pool->Reclaim();
  EXPECT_EQ(this->host_->in_use(), 0u);
}

TYPED_TEST(PoolConformanceTest, MemoryStatusDescribesThePool) {
  auto pool = this->Make(8ul << 30);
  absl::StatusOr<Block> b = pool->Allocate(8192);
  ASSERT_TRUE(b.ok());
  const std::string text = pool->MemoryStatus();
  EXPECT_NE(text.find("Effective device memory usage:"), std::string::npos) << text;
  EXPECT_NE(text.find(absl::StrCat("Pool '", PoolKindName(this->kKind), "' on ",
                                    TypeParam::device().ToString(), ":")),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("8.000 KiB allocated"), std::string::npos) << text;
  EXPECT_NE(text.find("(limit 8.000 GiB)"), std::string::npos) << text;
  pool->Free(*b);
}

TYPED_TEST(PoolConformanceTest, DestructionReturnsCacheToTheDevice) {
  auto allocator = std::make_unique<HostAllocator>(std::nullopt, TypeParam::device());
  HostAllocator* host = allocator.get();
  {
    auto pool = MakePool(this->kKind, std::move(allocator));
    absl::StatusOr<Block> b = pool->Allocate(100000);
    ASSERT_TRUE(b.ok());
    pool->Free(*b);
    EXPECT_EQ(host->in_use() > 0, this->kKind != PoolKind::kNone);
    // The allocator dies with the pool; check its count just before.
    pool->Reclaim();
    EXPECT_EQ(host->in_use(), 0u);
  }
}

}  // namespace
}  // namespace ndserve
