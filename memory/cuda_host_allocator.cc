#include "memory/cuda_host_allocator.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "memory/cuda_runtime.h"
#include "memory/host_allocator.h"

#ifdef NDSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ndserve {

absl::StatusOr<std::unique_ptr<CudaHostAllocator>> CudaHostAllocator::Create(int ordinal) {
  if (!CudaBuilt()) {
    return absl::FailedPreconditionError("this build of ndserve has no CUDA backend");
  }
  if (ordinal < 0 || ordinal >= CudaDeviceCount()) {
    return absl::FailedPreconditionError(absl::StrCat("no CUDA device ", ordinal, " (",
                                                      CudaDeviceCount(),
                                                      " device(s) present) to pin host memory for"));
  }
  return std::unique_ptr<CudaHostAllocator>(new CudaHostAllocator(ordinal));
}

std::uint64_t CudaHostAllocator::TotalBytes() const { return HostAllocator::PhysicalBytes(); }
std::uint64_t CudaHostAllocator::FreeBytes() const { return HostAllocator::AvailableBytes(); }

#ifdef NDSERVE_WITH_CUDA

absl::StatusOr<void*> CudaHostAllocator::DoAllocate(std::size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("CudaHostAllocator: zero-byte allocation");
  // The context of the device the memory stages for, so that it is mapped there first.
  cudaSetDevice(device().ordinal);
  void* ptr = nullptr;
  cudaError_t err = cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky; keep later calls clean
    if (err == cudaErrorMemoryAllocation) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cudaHostAlloc of ", bytes, " bytes for ", device().ToString(),
                       " failed: ", cudaGetErrorString(err)));
    }
    return absl::InternalError(absl::StrCat("cudaHostAlloc for ", device().ToString(), ": ",
                                            cudaGetErrorString(err)));
  }
  return ptr;
}

void CudaHostAllocator::DoDeallocate(void* ptr, std::size_t /*bytes*/) {
  cudaSetDevice(device().ordinal);
  cudaError_t err = cudaFreeHost(ptr);
  if (err != cudaSuccess) {
    LOG(ERROR) << "cudaFreeHost for " << device().ToString() << ": " << cudaGetErrorString(err);
  }
}

#else  // !NDSERVE_WITH_CUDA: Create() refuses, so these are never reached.

absl::StatusOr<void*> CudaHostAllocator::DoAllocate(std::size_t) {
  return absl::FailedPreconditionError("no CUDA backend");
}
void CudaHostAllocator::DoDeallocate(void*, std::size_t) {}

#endif

}  // namespace ndserve
