#ifndef NDSERVE_TESTS_GPU_GPU_POOL_FIXTURE_H_
#define NDSERVE_TESTS_GPU_GPU_POOL_FIXTURE_H_

// The typed fixture of the GPU pool tests: every pool kind over a real CUDA-side
// allocator (`Allocator::Create(0)`: device memory, or pinned host memory), skipped when
// no CUDA device is present.

#include <cstdint>
#include <memory>
#include <utility>

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
};

}  // namespace ndserve

#endif  // NDSERVE_TESTS_GPU_GPU_POOL_FIXTURE_H_
