// The memory families label each pool with its device: two GPUs and their pinned
// staging pools (host memory standing in, docs/design.md §4.3) scrape as separate series.
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/device_pools.h"
#include "memory/host_allocator.h"
#include "server/metrics_exporter.h"

namespace ndserve {
namespace {

using ::testing::HasSubstr;

TEST(DeviceLabelsMetricsTest, EachDevicesPoolIsItsOwnSeries) {
  DevicePools pools(MemoryConfig{}, [](Device device) {
    return absl::StatusOr<std::unique_ptr<DeviceAllocator>>(
        std::make_unique<HostAllocator>(std::nullopt, device));
  });
  for (Device d : {Device::Cuda(0), Device::Cuda(1), Device::CudaHost(0), Device::CudaHost(1)}) {
    ASSERT_TRUE(pools.Get(d).ok()) << d.ToString();
  }
  absl::StatusOr<Block> staged = (*pools.Get(Device::CudaHost(1)))->Allocate(4096);
  ASSERT_TRUE(staged.ok());

  MetricsExporter exporter(&pools);
  const std::string text = exporter.Text();
  for (const char* device : {"cuda:0", "cuda:1", "cuda_host:0"}) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("ndserve_memory_allocated_bytes{device=\"", device,
                                             "\",pool=\"binned\"} 0")));
  }
  EXPECT_THAT(text, HasSubstr("ndserve_memory_allocated_bytes{device=\"cuda_host:1\",pool="
                              "\"binned\"} 4096"));
  EXPECT_THAT(text, HasSubstr("ndserve_memory_device_alloc_total{device=\"cuda_host:1\"} 1"));
  (*pools.Get(Device::CudaHost(1)))->Free(*staged);
}

}  // namespace
}  // namespace ndserve
