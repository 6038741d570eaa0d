#ifndef NDSERVE_KERNELS_GPU_RESOURCES_H_
#define NDSERVE_KERNELS_GPU_RESOURCES_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/kernel_context.h"
#include "memory/device.h"

namespace ndserve::kernels {

// What CUDA kernels on one device need: a non-blocking stream, a cuBLAS handle bound to
// it, and host-mapped error flags (see KernelContext), plus the only calls a predictor
// makes on that stream besides the kernels: copies to and from pinned staging blocks,
// zero fills, the one synchronization per run, and CUDA graph capture and replay
// (docs/design.md §4.3). Every one of them is queued on this stream, never on the legacy
// default stream, and every CUDA or cuBLAS return code becomes a Status. Created only on
// a present device, so a GPU-less process never calls cuBLAS (nor CUDA beyond the device
// probe).
//
// Ownership: owns the stream, the handle and the pinned flags, released by the
// destructor (which synchronizes the stream first). Borrows the cuBLAS workspace
// (SetCublasWorkspace), which must outlive every queued GEMM. One per predictor; not
// thread-safe: the kernels of one request at a time use it.
class GpuResources {
 public:
  // What the stream did, for tests and benchmarks that prove the copy path (one
  // synchronization per run, one copy per input and per output).
  struct Counters {
    uint64_t syncs = 0;           // Synchronize calls
    uint64_t h2d_copies = 0;      // CopyToDevice calls
    uint64_t d2h_copies = 0;      // CopyToHost calls
    uint64_t graph_launches = 0;  // LaunchGraph calls
  };

  // cuBLAS gives every handle a default workspace at cublasCreate (64 MiB per handle
  // on an H100 with CUDA 13, measured with cudaMemGetInfo), and cublasSetWorkspace does
  // not free it. Every predictor hands cuBLAS a block of its pool instead, so the default
  // is turned off (CUBLAS_WORKSPACE_CONFIG=:0:0) unless the environment already sets
  // it; otherwise each loaded model would hold 64 MiB outside the pools, which neither
  // the metrics nor Reclaim see. Sets the environment once per process: a program calls
  // it before starting threads; Create calls it too (a no-op by then).
  static void DisableDefaultCublasWorkspace();

  // FAILED_PRECONDITION when the build has no CUDA backend or `device` is not a present
  // CUDA device; INTERNAL when the stream, handle or flags cannot be created.
  // `error_slots` (>= 1) host-mapped int32 flags are made, one per graph node of a
  // predictor, so that a deferred device-side error names its node.
  static absl::StatusOr<std::unique_ptr<GpuResources>> Create(Device device, int error_slots = 1);
  ~GpuResources();
  GpuResources(const GpuResources&) = delete;
  GpuResources& operator=(const GpuResources&) = delete;

  // The context kernels on this device take (error_flag: slot 0). Valid while this
  // object lives.
  const KernelContext& context() const { return context_; }
  // Flag slot `slot` (0 <= slot < error_slots()).
  int32_t* error_flag(int slot) const { return context_.error_flag + slot; }
  int error_slots() const { return error_slots_; }
  // Zeroes every flag slot. Only while no queued kernel can still write one.
  void ClearErrorFlags();
  // The first raised slot, or -1. Only after Synchronize.
  int FirstRaisedErrorFlag() const;

  // Waits until every kernel queued on the stream has finished; reports asynchronous
  // CUDA errors.
  absl::Status Synchronize();
  // Queues a copy on the stream. `host` should be pinned (a cuda_host block): pageable
  // memory works but makes the call wait for the copy.
  absl::Status CopyToDevice(void* device_dst, const void* host_src, std::size_t bytes);
  absl::Status CopyToHost(void* host_dst, const void* device_src, std::size_t bytes);
  absl::Status FillZero(void* device_dst, std::size_t bytes);

  // cuBLAS's working space, a block of this device's pool held by the caller, so that
  // cuBLAS allocates nothing itself (a cudaMalloc inside a run would both stall it and
  // break graph capture). `bytes` of it at `ptr` (256-byte aligned).
  absl::Status SetCublasWorkspace(void* ptr, std::size_t bytes);
  // TF32 tensor-core math for FP32 GEMMs on this handle (on) or exact FP32 (off).
  absl::Status SetTf32(bool on);
  // Whether products with a per-column bias and/or Relu run as one cuBLASLt call with
  // them in its epilogue (on, the default) or as the cuBLAS product with kernels of their
  // own around it (off: the baseline that shows what the fusion saves).
  void SetCublasLt(bool on);

  // CUDA graphs: BeginCapture starts capturing this stream in relaxed mode (a pool miss
  // inside the capture may cudaMalloc; the block then stays with the captured run); EndCapture
  // stops it and returns the instantiated graph (a cudaGraphExec_t), or an error when
  // anything in between could not be captured; AbortCapture ends a capture whose run
  // failed and discards what it recorded. DestroyGraph frees an EndCapture result.
  absl::Status BeginCapture();
  absl::StatusOr<void*> EndCapture();
  void AbortCapture();
  absl::Status LaunchGraph(void* graph);
  static void DestroyGraph(void* graph);

  const Counters& counters() const { return counters_; }

 private:
  explicit GpuResources(Device device) { context_.device = device; }
  KernelContext context_;
  void* cublaslt_handle_ = nullptr;  // owned; in context_ while SetCublasLt(true)
  int error_slots_ = 1;
  Counters counters_;
};

// Products that ran as one cuBLASLt call with their bias or activation in its epilogue,
// in this process so far: tests read it to prove that path is taken, since the
// three-kernel path gives the same numbers. Thread-safe.
uint64_t CublasLtEpilogueGemms();
void CountCublasLtEpilogueGemm();

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_GPU_RESOURCES_H_
