#ifndef NDSERVE_MEMORY_CUDA_RUNTIME_H_
#define NDSERVE_MEMORY_CUDA_RUNTIME_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace ndserve {

// True when this binary was built with the CUDA backend.
bool CudaBuilt();

// Number of CUDA devices, probed once with cudaGetDeviceCount and remembered. Zero on
// builds without CUDA, without a driver, or without a device. Every other CUDA or
// cuBLAS call in the code base is guarded by this being positive: on GPU-less hosts a
// failed cublasCreate has been seen to leave the process unable to bind its listeners.
int CudaDeviceCount();

// What the driver reports for CUDA device `ordinal` (cudaMemGetInfo): what every process
// holds on it, pools' cached segments included, which is what `nvidia-smi` shows.
// FAILED_PRECONDITION when the device is not present.
struct CudaMemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t used_bytes() const { return total_bytes - free_bytes; }
};
absl::StatusOr<CudaMemoryInfo> QueryCudaMemory(int ordinal);

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_CUDA_RUNTIME_H_
