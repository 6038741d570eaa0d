#ifndef NDSERVE_TESTS_GPU_GPU_POOL_FIXTURE_H_
#define NDSERVE_TESTS_GPU_GPU_POOL_FIXTURE_H_

// The typed fixture of the GPU pool tests: every pool kind over a real CUDA-side
// allocator (`Allocator::Create(0)`: device memory, or pinned host memory), skipped when
// no CUDA device is present.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "memory/cuda_runtime.h"
#include "memory/pool.h"
#include "tests/unit/memory/pool_test_util.h"

namespace ndserve {

template <typename Allocator, typename Kind>
class GpuPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
  std::unique_ptr<Pool> Make(std::uint64_t limit = kNoLimit) {
    absl::StatusOr<std::unique_ptr<Allocator>> a = Allocator::Create(0);
    EXPECT_TRUE(a.ok()) << a.status();
    PoolOptions options;
    options.limit_bytes = limit;
    return MakePool(Kind::value, std::move(*a), options);
  }

  // Fills a pool capped at `limit` with 3 MiB blocks: the allocation past the cap is
  // RESOURCE_EXHAUSTED (never an abort), the pool never reserves more than the cap, and
  // once everything is freed the same size fits again.
  void ExpectTheLimitIsAnError(std::uint64_t limit) {
    std::unique_ptr<Pool> pool = Make(limit);
    std::vector<Block> live;
    absl::Status last;
    for (std::uint64_t i = 0; i <= limit / (3 << 20) + 1; ++i) {
      absl::StatusOr<Block> b = pool->Allocate(3 << 20);
      if (!b.ok()) {
        last = b.status();
        break;
      }
      live.push_back(*b);
      EXPECT_LE(pool->Stats().reserved_bytes, limit);
    }
    EXPECT_EQ(last.code(), absl::StatusCode::kResourceExhausted);
    for (const Block& b : live) pool->Free(b);
    absl::StatusOr<Block> again = pool->Allocate(3 << 20);
    EXPECT_TRUE(again.ok()) << again.status();
    if (again.ok()) pool->Free(*again);
  }
};

}  // namespace ndserve

#endif  // NDSERVE_TESTS_GPU_GPU_POOL_FIXTURE_H_
