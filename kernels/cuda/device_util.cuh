#ifndef NDSERVE_KERNELS_CUDA_DEVICE_UTIL_CUH_
#define NDSERVE_KERNELS_CUDA_DEVICE_UTIL_CUH_

// Shared device helpers for the .cu files: grid sizing for grid-stride loops, IndexMap
// offsets and warp reductions.

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launchers.h"

namespace ndserve::kernels::gpu {

inline constexpr int kBlock = 256;

// Enough blocks to cover n with one element per thread, capped; kernels loop beyond.
inline unsigned GridFor(int64_t n, int per_block = kBlock) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
}

__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Offsets of linear index i for operands 0 and 1 of `m`.
__device__ __forceinline__ void MapOffsets(const IndexMap& m, int64_t i, int64_t* o0, int64_t* o1) {
  int64_t a = 0, b = 0;
  for (int d = m.rank - 1; d >= 0; --d) {
    const int64_t q = i / m.dims[d];
    const int64_t r = i - q * m.dims[d];
    a += r * m.strides[0][d];
    b += r * m.strides[1][d];
    i = q;
  }
  *o0 = a;
  *o1 = b;
}

__device__ __forceinline__ int64_t MapOffset0(const IndexMap& m, int64_t i) {
  int64_t a = 0;
  for (int d = m.rank - 1; d >= 0; --d) {
    const int64_t q = i / m.dims[d];
    a += (i - q * m.dims[d]) * m.strides[0][d];
    i = q;
  }
  return a;
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_DEVICE_UTIL_CUH_
