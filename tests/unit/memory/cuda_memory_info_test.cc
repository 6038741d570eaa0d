// QueryCudaMemory (memory/cuda_runtime.h), what the driver-visible memory test reads:
// an absent device is FAILED_PRECONDITION, never a crash; a present one reports a
// consistent free/total pair.
#include "gtest/gtest.h"
#include "memory/cuda_runtime.h"

namespace ndserve {
namespace {

TEST(CudaMemoryInfoTest, AbsentDeviceIsFailedPrecondition) {
  EXPECT_EQ(QueryCudaMemory(-1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(QueryCudaMemory(CudaDeviceCount()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CudaMemoryInfoTest, PresentDeviceReportsFreeWithinTotal) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<CudaMemoryInfo> info = QueryCudaMemory(0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->total_bytes, 0u);
  EXPECT_LE(info->free_bytes, info->total_bytes);
}

}  // namespace
}  // namespace ndserve
