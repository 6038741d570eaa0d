#ifndef NDSERVE_KERNELS_CUDA_DEVICE_UTIL_CUH_
#define NDSERVE_KERNELS_CUDA_DEVICE_UTIL_CUH_

// Shared device helpers for the .cu files: grid sizing for grid-stride loops, IndexMap
// offsets, warp reductions and the element-type switches of the launchers.

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

// Returns f(E{}) with E the unsigned integer `elem_bytes` wide, the type a byte-moving
// kernel instantiates for every dtype of that width; cudaErrorInvalidValue for another
// width.
template <typename F>
cudaError_t ForElementBytes(int elem_bytes, F&& f) {
  switch (elem_bytes) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
    default:
      return cudaErrorInvalidValue;
  }
}

// Returns f(T{}) for FP32, INT32 or INT64 `type` (what the arithmetic scatters admit);
// cudaErrorInvalidValue for any other.
template <typename F>
cudaError_t ForNumericType(ScalarType type, F&& f) {
  switch (type) {
    case ScalarType::kFp32:
      return f(float{});
    case ScalarType::kInt32:
      return f(int32_t{});
    case ScalarType::kInt64:
      return f(int64_t{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_DEVICE_UTIL_CUH_
