#ifndef NDSERVE_KERNELS_CUDA_DATA_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_DATA_LAUNCHERS_H_

// Raw launchers of the data-movement kernels (data.cu), in the manner of launchers.h:
// plain pointers and sizes in, the launch's cudaError_t out, work queued on `stream`,
// nothing launched for n == 0. Slice, Expand and Tile need no kernel of their own: they
// are LaunchTranspose's strided read (launchers.h) from an offset pointer. Reentrant.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/launchers.h"

namespace ndserve::kernels::gpu {

// Pad over up to kMaxRank dims. Mode codes follow ndserve::kernels::PadMode.
struct PadMap {
  int rank = 0;
  int mode = 0;  // 0 constant, 1 reflect, 2 edge
  int64_t out_dims[kMaxRank] = {};
  int64_t in_dims[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
  int64_t begin[kMaxRank] = {};
};

// y[i] = the element `bits` (its low elem_bytes bytes) for n elements of 1, 2, 4 or 8 bytes.
cudaError_t LaunchFill(void* y, int elem_bytes, uint64_t bits, int64_t n, cudaStream_t stream);
// y[i] = x[source(i)] or `fill_bits` where the source is padding.
cudaError_t LaunchPad(const void* x, void* y, int elem_bytes, const PadMap& map, uint64_t fill_bits,
                      int64_t n, cudaStream_t stream);
// Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of `matrices` rows x cols
// matrices, zeroing the rest.
cudaError_t LaunchTrilu(const void* x, void* y, int elem_bytes, int64_t matrices, int64_t rows,
                        int64_t cols, bool upper, int64_t k, cudaStream_t stream);
// y[i] = start + i * delta: FP32 and FP64 computed in double, integer types in int64.
cudaError_t LaunchRange(ScalarType type, void* y, double start_real, double delta_real,
                        int64_t start_int, int64_t delta_int, int64_t n, cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_DATA_LAUNCHERS_H_
