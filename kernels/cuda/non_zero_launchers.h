#ifndef NDSERVE_KERNELS_CUDA_NON_ZERO_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_NON_ZERO_LAUNCHERS_H_

// Raw launchers behind CUDA NonZero (see launchers.h for the conventions): an ordered
// compaction in two launches around the caller's read of the count. The input is cut into
// tiles of kNonZeroTile elements; LaunchNonZeroOffsets leaves in `offsets` (tiles + 1
// INT64s of device memory) each tile's first output column and, last, the total count;
// once the caller has allocated the [rank, count] output, LaunchNonZeroWrite writes each
// non-zero element's coordinates at its tile's offset plus its rank within the tile, so
// the columns are in row-major order.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/launchers.h"  // kMaxRank, ScalarType

namespace ndserve::kernels::gpu {

inline constexpr int64_t kNonZeroTile = 1024;

inline int64_t NonZeroTiles(int64_t n) { return (n + kNonZeroTile - 1) / kNonZeroTile; }

// FP32 is non-zero by value (-0 is zero, NaN is not); INT32, INT64, BOOL, UINT8 and INT8
// by their bits. Any other type is cudaErrorInvalidValue.
cudaError_t LaunchNonZeroOffsets(ScalarType type, const void* x, int64_t n, int64_t* offsets,
                                 cudaStream_t stream);

struct NonZeroArgs {
  int64_t n = 0;
  int rank = 1;
  int64_t dims[kMaxRank] = {};
};
// out is [a.rank, count] INT64; offsets as LaunchNonZeroOffsets left them.
cudaError_t LaunchNonZeroWrite(ScalarType type, const void* x, const NonZeroArgs& a,
                               const int64_t* offsets, int64_t count, int64_t* out,
                               cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_NON_ZERO_LAUNCHERS_H_
