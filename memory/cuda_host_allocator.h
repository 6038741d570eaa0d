#ifndef NDSERVE_MEMORY_CUDA_HOST_ALLOCATOR_H_
#define NDSERVE_MEMORY_CUDA_HOST_ALLOCATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "memory/device_allocator.h"

namespace ndserve {

// Page-locked host memory for CUDA device `ordinal` (cudaHostAlloc / cudaFreeHost): the
// only place in the code base that calls them. Copies between it and the device are
// DMA transfers that can run asynchronously on a stream, which pageable memory cannot
// (the driver stages it through a bounce buffer and the copy blocks the host); it is
// the staging memory of docs/design.md §4.3. The device is cuda_host:N; the host reads
// and writes the blocks directly. Blocks are page aligned. Total and free bytes are the
// machine's RAM (page-locking is bounded by it; RLIMIT_MEMLOCK does not apply to CUDA's
// pinning). Thread-safe.
class CudaHostAllocator final : public DeviceAllocator {
 public:
  // FAILED_PRECONDITION when the binary has no CUDA backend or the ordinal does not
  // name a present device (no CUDA call is made in either case beyond the probe).
  static absl::StatusOr<std::unique_ptr<CudaHostAllocator>> Create(int ordinal);

  std::uint64_t TotalBytes() const override;
  std::uint64_t FreeBytes() const override;

 private:
  explicit CudaHostAllocator(int ordinal) : DeviceAllocator(Device::CudaHost(ordinal)) {}

  absl::StatusOr<void*> DoAllocate(std::size_t bytes) override;
  void DoDeallocate(void* ptr, std::size_t bytes) override;
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_CUDA_HOST_ALLOCATOR_H_
