#ifndef NDSERVE_MEMORY_CUDA_ALLOCATOR_H_
#define NDSERVE_MEMORY_CUDA_ALLOCATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "memory/device_allocator.h"

namespace ndserve {

// cudaMalloc / cudaFree on one device: the only place in the code base that calls them.
// Blocks are 256-byte aligned (cudaMalloc guarantees it). Thread-safe: the device is
// made current on the calling thread for each call.
class CudaAllocator final : public DeviceAllocator {
 public:
  // FAILED_PRECONDITION when the binary has no CUDA backend or the ordinal does not
  // name a present device (no CUDA call is made in either case beyond the probe).
  static absl::StatusOr<std::unique_ptr<CudaAllocator>> Create(int ordinal);

  std::uint64_t TotalBytes() const override;
  std::uint64_t FreeBytes() const override;

 private:
  explicit CudaAllocator(int ordinal) : DeviceAllocator(Device::Cuda(ordinal)) {}

  absl::StatusOr<void*> DoAllocate(std::size_t bytes) override;
  void DoDeallocate(void* ptr, std::size_t bytes) override;
};

// The allocator for `device`: HostAllocator for cpu, CudaAllocator for cuda,
// CudaHostAllocator (memory/cuda_host_allocator.h) for cuda_host.
absl::StatusOr<std::unique_ptr<DeviceAllocator>> MakeDeviceAllocator(Device device);

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_CUDA_ALLOCATOR_H_
