// The pool conformance checks that make sense on device memory, over the CUDA
// allocator. Skipped when no CUDA device is present (the CPU suite in
// tests/unit/memory covers the same logic over the host allocator).
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "memory/cuda_allocator.h"
#include "memory/cuda_runtime.h"
#include "memory/pool.h"
#include "tests/gpu/gpu_pool_fixture.h"
#include "tests/unit/memory/pool_test_util.h"

#ifdef NDSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ndserve {
namespace {

template <typename Kind>
class CudaPoolTest : public GpuPoolTest<CudaAllocator, Kind> {};

TYPED_TEST_SUITE(CudaPoolTest, AllPoolKinds, PoolKindNames);

TYPED_TEST(CudaPoolTest, AlignedReusableAndAccounted) {
  auto pool = this->Make();
  EXPECT_EQ(pool->device(), Device::Cuda(0));
  std::vector<Block> live;
  std::mt19937 rng(1);
  for (int i = 0; i < 500; ++i) {
    absl::StatusOr<Block> b = pool->Allocate(1 + rng() % (2 << 20));
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->ptr) % 256, 0u);
#ifdef NDSERVE_WITH_CUDA
    ASSERT_EQ(cudaMemset(b->ptr, 0x5a, b->requested), cudaSuccess);
#endif
    live.push_back(*b);
    if (i % 3 == 0) {
      pool->Free(live.front());
      live.erase(live.begin());
    }
  }
  ExpectConsistent(*pool, live);
  for (const Block& b : live) pool->Free(b);
  EXPECT_EQ(pool->Stats().allocated_bytes, 0u);
  const std::uint64_t cached = pool->Stats().cached_bytes;
  EXPECT_EQ(pool->Reclaim(), cached);
  EXPECT_EQ(pool->Stats().reserved_bytes, 0u);
}

TYPED_TEST(CudaPoolTest, LimitAndOutOfMemory) { this->ExpectTheLimitIsAnError(64ull << 20); }

TYPED_TEST(CudaPoolTest, DeviceOutOfMemoryIsAnError) {
  auto pool = this->Make();
  // More than any GPU has: cudaMalloc fails, the pool reports RESOURCE_EXHAUSTED.
  absl::StatusOr<Block> b = pool->Allocate(std::size_t{1} << 50);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted) << b.status();
  absl::StatusOr<Block> ok = pool->Allocate(1 << 20);
  EXPECT_TRUE(ok.ok()) << ok.status();
  pool->Free(*ok);
}

TYPED_TEST(CudaPoolTest, ConcurrentAllocFree) {
  auto pool = this->Make();
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<Block> live;
      for (int i = 0; i < 2000; ++i) {
        if (!live.empty() && rng() % 2) {
          pool->Free(live.back());
          live.pop_back();
        } else {
          absl::StatusOr<Block> b = pool->Allocate(1 + rng() % (256 << 10));
          if (b.ok()) live.push_back(*b); else errors.fetch_add(1);
        }
      }
      for (const Block& b : live) pool->Free(b);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(pool->Stats().allocated_bytes, 0u);
  EXPECT_EQ(pool->Stats().outstanding_allocations, 0u);
}

}  // namespace
}  // namespace ndserve
