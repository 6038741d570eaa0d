#ifndef NDSERVE_MEMORY_CUDA_RUNTIME_H_
#define NDSERVE_MEMORY_CUDA_RUNTIME_H_

namespace ndserve {

// True when this binary was built with the CUDA backend.
bool CudaBuilt();

// Number of CUDA devices, probed once with cudaGetDeviceCount and remembered. Zero on
// builds without CUDA, without a driver, or without a device. Every other CUDA or
// cuBLAS call in the code base is guarded by this being positive: on GPU-less hosts a
// failed cublasCreate has been seen to leave the process unable to bind its listeners.
int CudaDeviceCount();

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_CUDA_RUNTIME_H_
