#include "memory/cuda_runtime.h"

#include "absl/strings/str_cat.h"

#ifdef NDSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ndserve {

bool CudaBuilt() {
#ifdef NDSERVE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int CudaDeviceCount() {
#ifdef NDSERVE_WITH_CUDA
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device" error
      return 0;
    }
    return n;
  }();
  return count;
#else
  return 0;
#endif
}

absl::StatusOr<CudaMemoryInfo> QueryCudaMemory(int ordinal) {
  if (ordinal < 0 || ordinal >= CudaDeviceCount()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device cuda:", ordinal, " (", CudaDeviceCount(), " present)"));
  }
#ifdef NDSERVE_WITH_CUDA
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) current = ordinal;
  cudaError_t err = cudaSetDevice(ordinal);
  std::size_t free_bytes = 0, total_bytes = 0;
  if (err == cudaSuccess) err = cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaSetDevice(current);
  if (err != cudaSuccess) {
    return absl::InternalError(absl::StrCat("cudaMemGetInfo: ", cudaGetErrorString(err)));
  }
  return CudaMemoryInfo{free_bytes, total_bytes};
#else
  return absl::FailedPreconditionError("built without the CUDA backend");
#endif
}

}  // namespace ndserve
