#ifndef NDSERVE_KERNELS_CUDA_CUBLAS_UTIL_H_
#define NDSERVE_KERNELS_CUDA_CUBLAS_UTIL_H_

// Host-side helpers for the entry points that call cuBLAS (g++-compiled .cc files only):
// status mapping, the context's handle, and the int range cuBLAS dimensions live in.

#include <cublas_v2.h>

#include <climits>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/kernel_context.h"

namespace ndserve::kernels::gpu {

// RESOURCE_EXHAUSTED when cuBLAS could not allocate, INTERNAL naming the call `what` for
// any other failure.
inline absl::Status CublasStatus(cublasStatus_t st, absl::string_view what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  if (st == CUBLAS_STATUS_ALLOC_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cuBLAS %s failed with status %d", what, static_cast<int>(st)));
  }
  return absl::InternalError(
      absl::StrFormat("cuBLAS %s failed with status %d", what, static_cast<int>(st)));
}

// The handle GpuResources bound to the context's stream; FAILED_PRECONDITION without one.
inline absl::StatusOr<cublasHandle_t> HandleOf(absl::string_view op, const KernelContext& ctx) {
  if (ctx.cublas_handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(op, ": the CUDA context has no cuBLAS handle (use GpuResources)"));
  }
  return static_cast<cublasHandle_t>(ctx.cublas_handle);
}

// cuBLAS takes int dimensions: UNIMPLEMENTED past INT_MAX rather than a silent wrap.
inline absl::Status CheckIntDims(absl::string_view op, int64_t m, int64_t n, int64_t k) {
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: matrix dimensions %dx%dx%d exceed the cuBLAS int range", op, m, n, k));
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_CUBLAS_UTIL_H_
