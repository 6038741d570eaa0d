// Every pool kind over the real pinned-host allocator (cudaHostAlloc): the blocks are
// page-locked host memory the host writes directly and the device copies from
// asynchronously. Skipped when no CUDA device is present (the CPU conformance suite
// runs the same pools over a host stand-in labelled cuda_host:0).
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "memory/cuda_allocator.h"
#include "memory/cuda_host_allocator.h"
#include "memory/cuda_runtime.h"
#include "memory/device_pools.h"
#include "memory/pool.h"
#include "tests/gpu/gpu_pool_fixture.h"
#include "tests/unit/memory/pool_test_util.h"

#ifdef NDSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ndserve {
namespace {

template <typename Kind>
class CudaHostPoolTest : public GpuPoolTest<CudaHostAllocator, Kind> {};

TYPED_TEST_SUITE(CudaHostPoolTest, AllPoolKinds, PoolKindNames);

TYPED_TEST(CudaHostPoolTest, BlocksArePinnedHostMemoryAndAccounted) {
  auto pool = this->Make();
  EXPECT_EQ(pool->device(), Device::CudaHost(0));
  std::vector<Block> live;
  std::mt19937 rng(1);
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<Block> b = pool->Allocate(1 + rng() % (1 << 20));
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->ptr) % 256, 0u);
    std::memset(b->ptr, 0x5a, b->requested);  // host-addressable
#ifdef NDSERVE_WITH_CUDA
    cudaPointerAttributes attributes{};
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, b->ptr), cudaSuccess);
    EXPECT_EQ(attributes.type, cudaMemoryTypeHost);  // page-locked, not pageable
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

TYPED_TEST(CudaHostPoolTest, AsyncCopiesRoundTripThroughTheDevice) {
#ifdef NDSERVE_WITH_CUDA
  auto pool = this->Make();
  constexpr std::size_t kBytes = 3 << 20;
  absl::StatusOr<Block> in = pool->Allocate(kBytes);
  absl::StatusOr<Block> out = pool->Allocate(kBytes);
  ASSERT_TRUE(in.ok() && out.ok());
  for (std::size_t i = 0; i < kBytes; ++i) static_cast<unsigned char*>(in->ptr)[i] = i * 7;
  std::memset(out->ptr, 0, kBytes);
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, kBytes), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device, in->ptr, kBytes, cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(out->ptr, device, kBytes, cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(std::memcmp(in->ptr, out->ptr, kBytes), 0);
  cudaStreamDestroy(stream);
  cudaFree(device);
  pool->Free(*in);
  pool->Free(*out);
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TYPED_TEST(CudaHostPoolTest, LimitIsAnErrorNotAnAbort) { this->ExpectTheLimitIsAnError(16ull << 20); }

TEST(CudaHostDevicePoolsTest, DevicePoolsMakesThePinnedPool) {
  if (CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  DevicePools pools(MemoryConfig{});
  absl::StatusOr<Pool*> pinned = pools.Get(Device::CudaHost(0));
  absl::StatusOr<Pool*> gpu = pools.Get(Device::Cuda(0));
  ASSERT_TRUE(pinned.ok() && gpu.ok());
  EXPECT_NE(*pinned, *gpu);
  EXPECT_EQ((*pinned)->device(), Device::CudaHost(0));
}

}  // namespace
}  // namespace ndserve
