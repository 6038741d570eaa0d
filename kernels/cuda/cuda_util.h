#ifndef NDSERVE_KERNELS_CUDA_CUDA_UTIL_H_
#define NDSERVE_KERNELS_CUDA_CUDA_UTIL_H_

// Host-side helpers for the CUDA entry points (g++-compiled .cc files only).

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda/launchers.h"
#include "kernels/kernel_context.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels::gpu {

inline cudaStream_t StreamOf(const KernelContext& ctx) {
  return static_cast<cudaStream_t>(ctx.cuda_stream);
}

// RESOURCE_EXHAUSTED when the device is out of memory (docs/design.md §9: OOM is never
// INTERNAL), INTERNAL naming the call for any other failure.
inline absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  if (err == cudaErrorMemoryAllocation) {
    return absl::ResourceExhaustedError(absl::StrCat("CUDA ", what, ": ", cudaGetErrorString(err)));
  }
  return absl::InternalError(absl::StrCat("CUDA ", what, ": ", cudaGetErrorString(err)));
}

// Makes ctx.device current on this thread (cheap when it already is).
inline absl::Status ActivateDevice(const KernelContext& ctx) {
  return CudaStatus(cudaSetDevice(ctx.device.ordinal), "cudaSetDevice");
}

inline ScalarType ToScalarType(DType dtype) { return static_cast<ScalarType>(dtype); }
static_assert(static_cast<int>(ScalarType::kFp64) == static_cast<int>(DType::kFp64) &&
                  static_cast<int>(ScalarType::kBool) == static_cast<int>(DType::kBool) &&
                  static_cast<int>(ScalarType::kFp16) == static_cast<int>(DType::kFp16) &&
                  static_cast<int>(ScalarType::kInt64) == static_cast<int>(DType::kInt64),
              "ScalarType must mirror DType");

// An IndexMap over `dims` with up to two operands' strides; UNIMPLEMENTED past kMaxRank
// merged dims (which no model we serve reaches).
inline absl::StatusOr<IndexMap> MakeIndexMap(absl::string_view op, ShapeSpan dims,
                                             ShapeSpan strides0, ShapeSpan strides1 = {}) {
  if (dims.size() > static_cast<std::size_t>(kMaxRank)) {
    return absl::UnimplementedError(absl::StrCat(op, ": CUDA kernel supports up to ", kMaxRank,
                                                 " dims after merging, got ", dims.size()));
  }
  IndexMap m;
  m.rank = static_cast<int>(dims.size());
  for (std::size_t d = 0; d < dims.size(); ++d) {
    m.dims[d] = dims[d];
    m.strides[0][d] = strides0[d];
    m.strides[1][d] = strides1.empty() ? 0 : strides1[d];
  }
  return m;
}

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_CUDA_UTIL_H_
