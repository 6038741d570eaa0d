#ifndef NDSERVE_MEMORY_DEVICE_ALLOCATOR_H_
#define NDSERVE_MEMORY_DEVICE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "memory/device.h"

namespace ndserve {

// The raw source of device memory under a Pool: every byte the daemon holds on a
// device comes from exactly one DeviceAllocator::Allocate.
//
// Contract (written once here, every implementation keeps it):
//  - Allocate returns memory aligned to at least kAlignment bytes, or
//    RESOURCE_EXHAUSTED when the device has no room; it never aborts or throws.
//  - Deallocate takes exactly a pointer and byte count that Allocate returned.
//  - Allocate(0) is not called by pools; implementations may reject it.
//  - Thread-safe: any thread may allocate and free at any time. Calls may be slow
//    (cudaMalloc synchronizes), which is why pools never hold their locks across them.
//  - The allocator does not own what it hands out; the caller must give it back
//    before the allocator is destroyed.
class DeviceAllocator {
 public:
  static constexpr std::size_t kAlignment = 256;

  explicit DeviceAllocator(Device device) : device_(device) {}
  virtual ~DeviceAllocator() = default;
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  absl::StatusOr<void*> Allocate(std::size_t bytes) { return DoAllocate(bytes); }
  void Deallocate(void* ptr, std::size_t bytes) { DoDeallocate(ptr, bytes); }

  // Physical memory of the device and how much of it is free right now (for the host
  // "device": the machine's RAM and its available memory).
  virtual std::uint64_t TotalBytes() const = 0;
  virtual std::uint64_t FreeBytes() const = 0;

  Device device() const { return device_; }

 private:
  virtual absl::StatusOr<void*> DoAllocate(std::size_t bytes) = 0;
  virtual void DoDeallocate(void* ptr, std::size_t bytes) = 0;

  const Device device_;
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_DEVICE_ALLOCATOR_H_
