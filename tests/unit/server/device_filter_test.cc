// The admin API's device selection: a label picks exactly one device (so a GPU's pool
// and its pinned staging pool can be told apart), an ordinal picks every device of that
// ordinal, and the label wins when both are given.
#include "server/device_filter.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_pools.h"
#include "memory/host_allocator.h"
#include "server/admin_service.h"

namespace ndserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(DeviceFilterTest, ALabelSelectsExactlyThatDevice) {
  absl::StatusOr<DeviceFilter> pinned = DeviceFilter::Make(-1, "cuda_host:0");
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_TRUE(pinned->Matches(Device::CudaHost(0)));
  EXPECT_FALSE(pinned->Matches(Device::Cuda(0)));
  EXPECT_FALSE(pinned->Matches(Device::Cpu()));
  EXPECT_FALSE(pinned->Matches(Device::CudaHost(1)));

  absl::StatusOr<DeviceFilter> gpu = DeviceFilter::Make(-1, "CUDA:1");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_TRUE(gpu->Matches(Device::Cuda(1)));
  EXPECT_FALSE(gpu->Matches(Device::CudaHost(1)));
  EXPECT_EQ(gpu->Describe(), "device cuda:1");

  // The label wins over an ordinal given beside it.
  absl::StatusOr<DeviceFilter> both = DeviceFilter::Make(1, "cpu:0");
  ASSERT_TRUE(both.ok());
  EXPECT_TRUE(both->Matches(Device::Cpu()));
  EXPECT_FALSE(both->Matches(Device::Cuda(1)));
}

TEST(DeviceFilterTest, AnOrdinalSelectsEveryDeviceOfThatOrdinal) {
  absl::StatusOr<DeviceFilter> zero = DeviceFilter::Make(0, "");
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->Matches(Device::Cpu()));
  EXPECT_TRUE(zero->Matches(Device::Cuda(0)));
  EXPECT_TRUE(zero->Matches(Device::CudaHost(0)));
  EXPECT_FALSE(zero->Matches(Device::Cuda(1)));
  EXPECT_TRUE(DeviceFilter::All().Matches(Device::CudaHost(3)));
}

TEST(DeviceFilterTest, BadSelectionsAreInvalidArgument) {
  for (const char* label : {"tpu:0", "cuda:-1", "cuda_host:x", "cuda_host0", "cuda:"}) {
    absl::StatusOr<DeviceFilter> f = DeviceFilter::Make(-1, label);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << label;
  }
  absl::StatusOr<DeviceFilter> f = DeviceFilter::Make(-2, "");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.status().message(), HasSubstr("-1 selects every device"));
}

// The admin handlers select pools through the filter: host memory stands in for a GPU
// and its pinned staging memory.
TEST(DeviceFilterTest, SelectsAGpusPoolApartFromItsPinnedStagingPool) {
  DevicePools pools(MemoryConfig{}, [](Device device) {
    return absl::StatusOr<std::unique_ptr<DeviceAllocator>>(
        std::make_unique<HostAllocator>(std::nullopt, device));
  });
  Pool* cpu = *pools.Get(Device::Cpu());
  Pool* gpu = *pools.Get(Device::Cuda(0));
  Pool* pinned = *pools.Get(Device::CudaHost(0));

  EXPECT_THAT(*AdminServiceImpl::SelectPools(pools, *DeviceFilter::Make(-1, "cuda_host:0")),
              ElementsAre(pinned));
  EXPECT_THAT(*AdminServiceImpl::SelectPools(pools, *DeviceFilter::Make(-1, "cuda:0")),
              ElementsAre(gpu));
  EXPECT_THAT(*AdminServiceImpl::SelectPools(pools, *DeviceFilter::Make(0, "")),
              ElementsAre(cpu, gpu, pinned));
  absl::StatusOr<std::vector<Pool*>> none =
      AdminServiceImpl::SelectPools(pools, *DeviceFilter::Make(-1, "cuda_host:1"));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("device cuda_host:1"));
}

}  // namespace
}  // namespace ndserve
