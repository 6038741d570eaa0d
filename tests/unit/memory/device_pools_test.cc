// DevicePools over several devices, with host memory standing in for GPUs and their
// pinned staging memory (docs/design.md §4.3): one pool per device key, each reporting
// its device, made once and listed in device order.
#include "memory/device_pools.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/cuda_runtime.h"
#include "memory/host_allocator.h"

namespace ndserve {
namespace {

using ::testing::HasSubstr;

// Host memory labelled with the device asked for: two GPUs, their pinned memory and
// the CPU on a machine with none of the GPUs.
DevicePools::AllocatorFactory StandIns(std::vector<Device>* made) {
  return [made](Device device) -> absl::StatusOr<std::unique_ptr<DeviceAllocator>> {
    made->push_back(device);
    return std::make_unique<HostAllocator>(std::nullopt, device);
  };
}

TEST(DevicePoolsTest, OnePoolPerDeviceKeyEachReportingItsDevice) {
  std::vector<Device> made;
  DevicePools pools(MemoryConfig{}, StandIns(&made));
  absl::StatusOr<Pool*> gpu1 = pools.Get(Device::Cuda(1));
  absl::StatusOr<Pool*> pinned1 = pools.Get(Device::CudaHost(1));
  absl::StatusOr<Pool*> cpu = pools.Get(Device::Cpu());
  absl::StatusOr<Pool*> gpu0 = pools.Get(Device::Cuda(0));
  absl::StatusOr<Pool*> pinned0 = pools.Get(Device::CudaHost(0));
  ASSERT_TRUE(gpu1.ok() && pinned1.ok() && cpu.ok() && gpu0.ok() && pinned0.ok());
  EXPECT_EQ((*gpu0)->device(), Device::Cuda(0));
  EXPECT_EQ((*gpu1)->device(), Device::Cuda(1));
  EXPECT_EQ((*pinned1)->device(), Device::CudaHost(1));
  EXPECT_EQ((*pinned0)->device(), Device::CudaHost(0));
  EXPECT_EQ((*cpu)->device(), Device::Cpu());
  EXPECT_EQ(*pools.Get(Device::CudaHost(1)), *pinned1);  // made once
  EXPECT_EQ(*pools.Get(Device::Cuda(1)), *gpu1);
  EXPECT_EQ(made.size(), 5u);
  EXPECT_EQ(pools.All(), (std::vector<Pool*>{*cpu, *gpu0, *gpu1, *pinned0, *pinned1}));

  // Blocks of one device's pool are counted there only.
  absl::StatusOr<Block> b = (*pinned0)->Allocate(1000);
  ASSERT_TRUE(b.ok());
  EXPECT_GT((*pinned0)->Stats().allocated_bytes, 0u);
  for (Pool* other : {*gpu0, *gpu1, *pinned1, *cpu}) {
    EXPECT_EQ(other->Stats().allocated_bytes, 0u) << other->device().ToString();
  }
  EXPECT_THAT((*pinned0)->MemoryStatus(), HasSubstr("on cuda_host:0"));
  (*pinned0)->Free(*b);
}

TEST(DevicePoolsTest, AnAllocatorForAnotherDeviceIsRefused) {
  DevicePools pools(MemoryConfig{}, [](Device device) {
    return absl::StatusOr<std::unique_ptr<DeviceAllocator>>(
        std::make_unique<HostAllocator>(std::nullopt, Device::CudaHost(device.ordinal)));
  });
  absl::StatusOr<Pool*> gpu = pools.Get(Device::Cuda(0));
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(gpu.status().message()),
              HasSubstr("the allocator made for cuda:0 reports cuda_host:0"));
  EXPECT_TRUE(pools.All().empty());
}

TEST(DevicePoolsTest, PinnedMemoryOfAMissingGpuIsAPreconditionError) {
  DevicePools pools(MemoryConfig{});
  absl::StatusOr<Pool*> p = pools.Get(Device::CudaHost(CudaDeviceCount()));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(pools.All().empty());
}

TEST(DevicePoolsTest, PinnedHostDeviceSpelling) {
  EXPECT_EQ(Device::CudaHost(3).ToString(), "cuda_host:3");
  EXPECT_TRUE(Device::CudaHost(0).is_cuda_host());
  EXPECT_FALSE(Device::CudaHost(0).is_cuda());
  EXPECT_LT(Device::Cuda(7), Device::CudaHost(0));  // listed after every GPU
  // Not a device a model runs on, so --device does not take it.
  EXPECT_FALSE(ParseDevice("cuda_host:0").ok());
}

}  // namespace
}  // namespace ndserve
