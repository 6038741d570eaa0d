#ifndef NDSERVE_KERNELS_GPU_RESOURCES_H_
#define NDSERVE_KERNELS_GPU_RESOURCES_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/kernel_context.h"
#include "memory/device.h"

namespace ndserve::kernels {

// What CUDA kernels on one device need: a non-blocking stream, a cuBLAS handle bound to
// it, and the host-mapped error flag (see KernelContext). Created only on a present
// device, so a GPU-less process never calls cuBLAS (nor CUDA beyond the device probe).
//
// Ownership: owns the stream, the handle and the pinned flag, released by the destructor
// (which synchronizes the stream first). One per predictor; not thread-safe: the kernels
// of one request at a time use it.
class GpuResources {
 public:
  // FAILED_PRECONDITION when the build has no CUDA backend or `device` is not a present
  // CUDA device; INTERNAL when the stream, handle or flag cannot be created.
  static absl::StatusOr<std::unique_ptr<GpuResources>> Create(Device device);
  ~GpuResources();
  GpuResources(const GpuResources&) = delete;
  GpuResources& operator=(const GpuResources&) = delete;

  // The context kernels on this device take. Valid while this object lives.
  const KernelContext& context() const { return context_; }
  // Waits until every kernel queued on the stream has finished; reports asynchronous
  // CUDA errors.
  absl::Status Synchronize();

 private:
  explicit GpuResources(Device device) { context_.device = device; }
  KernelContext context_;
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_GPU_RESOURCES_H_
