// NonZero on the device (see non_zero_launchers.h): a tile is one block of kBlock threads
// with kItems consecutive elements each, so thread order within a tile is row-major order
// and a block-wide exclusive scan of the threads' counts gives each non-zero element its
// rank in the tile. The tiles' counts are scanned by one block walking them in order.
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/non_zero_launchers.h"

namespace ndserve::kernels::gpu {
namespace {

constexpr int kItems = 4;
static_assert(kBlock * kItems == kNonZeroTile, "a tile is one block's elements");
constexpr int kWarps = kBlock / 32;

template <typename T>
__device__ __forceinline__ bool IsNonZero(T v) {
  return v != T(0);
}

// Exclusive prefix sum of v over the block's threads (in thread order); *total gets the
// block's sum. Every thread of the block must call it.
__device__ int64_t BlockExclusiveScan(int64_t v, int64_t* total) {
  __shared__ int64_t warp_sums[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t up = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += up;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int64_t w = lane < kWarps ? warp_sums[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      const int64_t up = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += up;
    }
    if (lane < kWarps) warp_sums[lane] = w;  // now inclusive over warps
  }
  __syncthreads();
  const int64_t excl = incl - v + (warp > 0 ? warp_sums[warp - 1] : 0);
  *total = warp_sums[kWarps - 1];
  __syncthreads();  // warp_sums is reused by the next call
  return excl;
}

// Bit j set when this thread's element j of `tile` is non-zero.
template <typename T>
__device__ __forceinline__ unsigned ThreadMask(const T* x, int64_t n, int64_t tile) {
  const int64_t first = tile * kNonZeroTile + static_cast<int64_t>(threadIdx.x) * kItems;
  unsigned mask = 0;
  for (int j = 0; j < kItems; ++j) {
    if (first + j < n && IsNonZero(x[first + j])) mask |= 1u << j;
  }
  return mask;
}

template <typename T>
__global__ void TileCountsKernel(const T* x, int64_t n, int64_t tiles, int64_t* counts) {
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int64_t total;
    BlockExclusiveScan(__popc(ThreadMask(x, n, tile)), &total);
    if (threadIdx.x == 0) counts[tile] = total;
  }
}

// In place: counts[t] becomes the sum of counts[0..t), and counts[tiles] the total.
__global__ void ScanTileCountsKernel(int64_t* counts, int64_t tiles) {
  int64_t carry = 0;
  for (int64_t base = 0; base < tiles; base += kNonZeroTile) {
    const int64_t first = base + static_cast<int64_t>(threadIdx.x) * kItems;
    int64_t c[kItems];
    int64_t sum = 0;
    for (int j = 0; j < kItems; ++j) {
      c[j] = first + j < tiles ? counts[first + j] : 0;
      sum += c[j];
    }
    int64_t chunk;
    int64_t at = carry + BlockExclusiveScan(sum, &chunk);
    for (int j = 0; j < kItems; ++j) {
      if (first + j < tiles) counts[first + j] = at;
      at += c[j];
    }
    carry += chunk;
  }
  if (threadIdx.x == 0) counts[tiles] = carry;
}

template <typename T>
__global__ void WriteCoordinatesKernel(const T* x, NonZeroArgs a, int64_t tiles,
                                       const int64_t* offsets, int64_t count, int64_t* out) {
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const unsigned mask = ThreadMask(x, a.n, tile);
    int64_t unused;
    int64_t col = offsets[tile] + BlockExclusiveScan(__popc(mask), &unused);
    const int64_t first = tile * kNonZeroTile + static_cast<int64_t>(threadIdx.x) * kItems;
    for (int j = 0; j < kItems; ++j) {
      if ((mask >> j & 1u) == 0) continue;
      int64_t rest = first + j;
      for (int d = a.rank - 1; d >= 0; --d) {
        const int64_t q = rest / a.dims[d];
        out[d * count + col] = rest - q * a.dims[d];
        rest = q;
      }
      ++col;
    }
  }
}

// Calls f(T{}) with the type whose comparison with 0 decides `type`'s non-zero elements.
template <typename F>
cudaError_t ForNonZeroType(ScalarType type, F&& f) {
  switch (type) {
    case ScalarType::kFp32:
      return f(float{});
    case ScalarType::kInt32:
      return f(uint32_t{});
    case ScalarType::kInt64:
      return f(uint64_t{});
    case ScalarType::kBool:
    case ScalarType::kUint8:
    case ScalarType::kInt8:
      return f(uint8_t{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t LaunchNonZeroOffsets(ScalarType type, const void* x, int64_t n, int64_t* offsets,
                                 cudaStream_t stream) {
  const int64_t tiles = NonZeroTiles(n);
  if (tiles == 0) {
    return cudaMemsetAsync(offsets, 0, sizeof(int64_t), stream);
  }
  return ForNonZeroType(type, [&](auto tag) {
    using T = decltype(tag);
    TileCountsKernel<T><<<GridFor(tiles, 1), kBlock, 0, stream>>>(static_cast<const T*>(x), n,
                                                                 tiles, offsets);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
    ScanTileCountsKernel<<<1, kBlock, 0, stream>>>(offsets, tiles);
    return cudaGetLastError();
  });
}

cudaError_t LaunchNonZeroWrite(ScalarType type, const void* x, const NonZeroArgs& a,
                               const int64_t* offsets, int64_t count, int64_t* out,
                               cudaStream_t stream) {
  const int64_t tiles = NonZeroTiles(a.n);
  if (tiles == 0 || count == 0) return cudaSuccess;
  return ForNonZeroType(type, [&](auto tag) {
    using T = decltype(tag);
    WriteCoordinatesKernel<T><<<GridFor(tiles, 1), kBlock, 0, stream>>>(
        static_cast<const T*>(x), a, tiles, offsets, count, out);
    return cudaGetLastError();
  });
}

}  // namespace ndserve::kernels::gpu
