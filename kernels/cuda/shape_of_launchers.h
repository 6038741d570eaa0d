#ifndef NDSERVE_KERNELS_CUDA_SHAPE_OF_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_SHAPE_OF_LAUNCHERS_H_

// Raw launcher behind CUDA Shape and Size (see launchers.h for the conventions). The
// values travel in the launch's parameter block, so the kernel reads no device memory and
// the caller's host copy need not outlive the call.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ndserve::kernels::gpu {

// The most values one launch writes; a Shape of a higher-rank input is refused before.
inline constexpr int kMaxShapeValues = 32;

struct Int64Values {
  int n = 0;
  int64_t v[kMaxShapeValues] = {};
};

// out[i] = values.v[i] for i < values.n; nothing is launched when n == 0.
cudaError_t LaunchWriteInt64s(const Int64Values& values, int64_t* out, cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_SHAPE_OF_LAUNCHERS_H_
