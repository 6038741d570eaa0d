#ifndef NDSERVE_KERNELS_KERNEL_CONTEXT_H_
#define NDSERVE_KERNELS_KERNEL_CONTEXT_H_

#include <cstdint>

#include "memory/device.h"

namespace ndserve::kernels {

// What a kernel call may use besides its tensors. The CUDA members are opaque pointers so
// this header (and the engine) need no CUDA include. A plain value; it owns nothing:
// GpuResources (gpu_resources.h) owns the stream, handle and flag behind a CUDA context.
//
// CUDA kernels are queued on `cuda_stream` and return before they have run (except
// Gather, see dispatch.h); the caller synchronizes the stream before it reads outputs
// or frees any buffer a kernel used.
struct KernelContext {
  Device device;
  void* cuda_stream = nullptr;    // cudaStream_t; null is the legacy default stream
  void* cublas_handle = nullptr;  // cublasHandle_t, already bound to cuda_stream
  // Host-mapped pinned int32 that device code sets when it meets bad input it cannot
  // report otherwise (an out-of-range Gather index). Required by CUDA Gather.
  int32_t* error_flag = nullptr;

  static KernelContext Cpu() { return KernelContext{}; }
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_KERNEL_CONTEXT_H_
