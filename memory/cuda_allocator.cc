#include "memory/cuda_allocator.h"

#include "base/logging.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "memory/cuda_host_allocator.h"
#include "memory/cuda_runtime.h"
#include "memory/host_allocator.h"

#ifdef NDSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ndserve {

absl::StatusOr<std::unique_ptr<CudaAllocator>> CudaAllocator::Create(int ordinal) {
  if (!CudaBuilt()) {
    return absl::FailedPreconditionError("this build of ndserve has no CUDA backend");
  }
  if (ordinal < 0 || ordinal >= CudaDeviceCount()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no CUDA device ", ordinal, " (", CudaDeviceCount(), " device(s) present)"));
  }
  return std::unique_ptr<CudaAllocator>(new CudaAllocator(ordinal));
}

#ifdef NDSERVE_WITH_CUDA

absl::StatusOr<void*> CudaAllocator::DoAllocate(std::size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("CudaAllocator: zero-byte allocation");
  cudaSetDevice(device().ordinal);
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // an OOM is not sticky; clear it so later calls are clean
    if (err == cudaErrorMemoryAllocation) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cudaMalloc of ", bytes, " bytes on ", device().ToString(), " failed: ",
                       cudaGetErrorString(err)));
    }
    return absl::InternalError(absl::StrCat("cudaMalloc on ", device().ToString(), ": ",
                                            cudaGetErrorString(err)));
  }
  return ptr;
}

void CudaAllocator::DoDeallocate(void* ptr, std::size_t /*bytes*/) {
  cudaSetDevice(device().ordinal);
  cudaError_t err = cudaFree(ptr);
  if (err != cudaSuccess) {
    LOG(ERROR) << "cudaFree on " << device().ToString() << ": " << cudaGetErrorString(err);
  }
}

std::uint64_t CudaAllocator::TotalBytes() const {
  cudaSetDevice(device().ordinal);
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return total;
}

std::uint64_t CudaAllocator::FreeBytes() const {
  cudaSetDevice(device().ordinal);
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
  return free;
}

#else  // !NDSERVE_WITH_CUDA: Create() refuses, so these are never reached.

absl::StatusOr<void*> CudaAllocator::DoAllocate(std::size_t) {
  return absl::FailedPreconditionError("no CUDA backend");
}
void CudaAllocator::DoDeallocate(void*, std::size_t) {}
std::uint64_t CudaAllocator::TotalBytes() const { return 0; }
std::uint64_t CudaAllocator::FreeBytes() const { return 0; }

#endif

absl::StatusOr<std::unique_ptr<DeviceAllocator>> MakeDeviceAllocator(Device device) {
  if (device.is_cuda_host()) {
    absl::StatusOr<std::unique_ptr<CudaHostAllocator>> pinned =
        CudaHostAllocator::Create(device.ordinal);
    if (!pinned.ok()) return pinned.status();
    return std::unique_ptr<DeviceAllocator>(std::move(*pinned));
  }
  if (!device.is_cuda()) return std::make_unique<HostAllocator>();
  absl::StatusOr<std::unique_ptr<CudaAllocator>> cuda = CudaAllocator::Create(device.ordinal);
  if (!cuda.ok()) return cuda.status();
  return std::unique_ptr<DeviceAllocator>(std::move(*cuda));
}

}  // namespace ndserve
