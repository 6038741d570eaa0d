#ifndef NDSERVE_KERNELS_CUDA_GATHER_ND_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_GATHER_ND_LAUNCHERS_H_

// Raw launcher behind CUDA GatherND (see launchers.h for the conventions).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/launchers.h"  // kMaxRank

namespace ndserve::kernels::gpu {

// kernels/gather_nd_plan.h's GatherNDPlan with its k <= kMaxRank coordinates inline.
struct GatherNDArgs {
  int64_t tuples = 0, per_batch = 1, batch_stride = 0, slice = 1;
  int k = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
};

// out = the slice of `elem_bytes`-byte elements each INT64 index tuple names, in tuple
// order. A tuple with an out-of-range coordinate sets *error_flag = 1 and gives zeros; a
// tuple is checked even when its slice is empty, as the CPU checks them all.
cudaError_t LaunchGatherND(const void* data, int elem_bytes, const int64_t* indices, void* out,
                           const GatherNDArgs& a, int32_t* error_flag, cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_GATHER_ND_LAUNCHERS_H_
