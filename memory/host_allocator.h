#ifndef NDSERVE_MEMORY_HOST_ALLOCATOR_H_
#define NDSERVE_MEMORY_HOST_ALLOCATOR_H_

#include <atomic>
#include <cstdint>
#include <optional>

#include "memory/device_allocator.h"

namespace ndserve {

// Host memory standing in for a device on machines without a GPU: 256-byte aligned
// blocks from aligned_alloc. `capacity` makes it behave like a device of that size
// (allocations beyond it fail with RESOURCE_EXHAUSTED), which tests use to reach the
// device-full branches of a pool; without it the capacity is the machine's RAM.
// `device` is the device it reports: cpu:0 in the daemon; tests on machines without a
// GPU label it cuda_host:N to stand in for the pinned-host allocator
// (CudaHostAllocator), or cuda:N to give DevicePools a pool per GPU (nothing may run a
// kernel on that memory). Thread-safe.
class HostAllocator final : public DeviceAllocator {
 public:
  explicit HostAllocator(std::optional<std::uint64_t> capacity = std::nullopt,
                         Device device = Device::Cpu());

  // The machine's RAM and what of it is available now (sysconf): the total and free
  // bytes of every host-memory allocator.
  static std::uint64_t PhysicalBytes();
  static std::uint64_t AvailableBytes();

  std::uint64_t TotalBytes() const override;
  std::uint64_t FreeBytes() const override;
  // Bytes handed out and not yet returned.
  std::uint64_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

 private:
  absl::StatusOr<void*> DoAllocate(std::size_t bytes) override;
  void DoDeallocate(void* ptr, std::size_t bytes) override;

  const std::optional<std::uint64_t> capacity_;
  std::atomic<std::uint64_t> in_use_{0};
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_HOST_ALLOCATOR_H_
