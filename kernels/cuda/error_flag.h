#ifndef NDSERVE_KERNELS_CUDA_ERROR_FLAG_H_
#define NDSERVE_KERNELS_CUDA_ERROR_FLAG_H_

// The host side of KernelContext::error_flag for the CUDA kernels that meet bad indices
// (Gather, ScatterND, GatherElements, ScatterElements, GatherND, RoiAlign, the training
// ops). g++-compiled .cc files only.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_util.h"

namespace ndserve::kernels::gpu {

inline absl::Status RequireErrorFlag(const KernelContext& ctx, absl::string_view op) {
  if (ctx.error_flag != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(op, ": the CUDA context has no error flag (use GpuResources)"));
}

// Before such a kernel: clear the flag unless the caller defers the check (then it
// cleared every node's flag before the run). The stream is idle after each check below,
// so no earlier kernel can still be writing it.
inline void ClearErrorFlag(const KernelContext& ctx) {
  if (!ctx.defer_error_check) *ctx.error_flag = 0;
}

// After it: unless deferred, waits for the stream and turns a raised flag into
// INVALID_ARGUMENT "<op>: <message>". Synchronous so that bad indices come back for this
// request; the cost is one stream sync per such node.
inline absl::Status CheckErrorFlag(const KernelContext& ctx, absl::string_view op,
                                   absl::string_view message) {
  if (ctx.defer_error_check) return absl::OkStatus();
  NDS_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(StreamOf(ctx)),
                                 absl::StrCat(op, " cudaStreamSynchronize")));
  if (*static_cast<volatile int32_t*>(ctx.error_flag) != 0) {
    *ctx.error_flag = 0;
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", message));
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_ERROR_FLAG_H_
