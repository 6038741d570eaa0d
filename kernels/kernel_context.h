#ifndef NDSERVE_KERNELS_KERNEL_CONTEXT_H_
#define NDSERVE_KERNELS_KERNEL_CONTEXT_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

#include "kernels/tensor_view.h"
#include "memory/device.h"

namespace ndserve::kernels {

namespace cpu {
class PackedMatrix;
}  // namespace cpu

// What a kernel call may use besides its tensors. The CUDA members are opaque pointers so
// this header (and the engine) need no CUDA include. A plain value; it owns nothing:
// GpuResources (gpu_resources.h) owns the stream, handle and flag behind a CUDA context.
//
// CUDA kernels are queued on `cuda_stream` and return before they have run (except
// Gather, see dispatch.h); the caller synchronizes the stream before it reads outputs
// or frees any buffer a kernel used.
// Scratch memory for kernels that need working space (im2col, packed operands, sort
// buffers). The engine implements it over the request's scope (PredictorContext), so
// scratch is accounted to the request and bounded by the pool's limit, never taken from
// malloc. A block stays valid until the request's context closes, so a CUDA kernel may
// use it in queued work. Out of memory is RESOURCE_EXHAUSTED. Not thread-safe: one
// kernel call at a time.
class ScratchAllocator {
 public:
  virtual ~ScratchAllocator() = default;
  // `bytes` of device memory (on the context's device), aligned to 256 bytes.
  virtual absl::StatusOr<void*> Allocate(std::size_t bytes) = 0;
};

// Where the kernel of an op whose output dims depend on its input values (kOpDataShape,
// ops.def: NonZero, NonMaxSuppression) gets its outputs, once it has worked out their
// shapes; such a kernel is called with no outputs. The engine implements it over the
// request's scope, like ScratchAllocator. The buffer is on the context's device, of the
// type InferOutputs gave, and valid until the request's context closes.
class OutputAllocator {
 public:
  virtual ~OutputAllocator() = default;
  // Output `index` with `shape`: the inferred shape with each kDataDependentDim decided.
  virtual absl::StatusOr<TensorView> Allocate(int index, ShapeSpan shape) = 0;
};

struct KernelContext {
  Device device;
  void* cuda_stream = nullptr;    // cudaStream_t; null is the legacy default stream
  void* cublas_handle = nullptr;  // cublasHandle_t, already bound to cuda_stream
  // cublasLtHandle_t for Gemm and MatMul products whose bias and Relu fit cuBLASLt's
  // epilogue (one kernel instead of a bias pass, the product and an activation pass);
  // null: those go through cublas_handle (kernels/cuda/gemm_lt.h). GpuResources sets
  // these from the model's `cublaslt` and `tf32` settings and its cuBLAS workspace.
  void* cublaslt_handle = nullptr;
  void* cublas_workspace = nullptr;
  std::size_t cublas_workspace_bytes = 0;
  bool tf32 = false;
  // Host-mapped pinned int32 that device code sets when it meets bad input it cannot
  // report otherwise (an out-of-range Gather index). Required by CUDA Gather.
  int32_t* error_flag = nullptr;
  // When set, a kernel that raises `error_flag` neither clears it first nor synchronizes
  // to read it: whoever runs the graph clears the flags before the run and reads them
  // after its one synchronization (docs/design.md §4.3), so a run has no sync inside
  // and can be captured as a CUDA graph.
  bool defer_error_check = false;
  // Where kernels take working space; a kernel that needs some fails with
  // FAILED_PRECONDITION when it is null.
  ScratchAllocator* scratch = nullptr;
  // The node's constant weight, packed when the model loaded (kernels/cpu/packed_weights.h):
  // CPU Conv, Gemm and MatMul read it instead of their weight input. Null when there is
  // none; a kernel checks its dims against its call before using it.
  const cpu::PackedMatrix* packed_weight = nullptr;
  // Set for kOpDataShape ops (and only for them): see OutputAllocator.
  OutputAllocator* outputs = nullptr;

  static KernelContext Cpu() { return KernelContext{}; }
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_KERNEL_CONTEXT_H_
