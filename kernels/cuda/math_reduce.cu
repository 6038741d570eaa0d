// The math family's reductions and axis ops: ReduceMax/ReduceMin and ReduceL2,
// ReduceSumSquare, ReduceLogSumExp, ReduceProd (one thread per output),
// ArgMax, TopK and CumSum (one thread per (outer, inner) row along the axis, sharing the
// row code of kernels/topk_ops.h with the CPU), LogSoftmax (one warp per row for the last
// axis, else one thread per column).
#include <cmath>
#include <limits>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/math_launchers.h"
#include "kernels/elementwise_ops.h"
#include "kernels/math_ops.h"
#include "kernels/topk_ops.h"

namespace ndserve::kernels::gpu {
namespace {

template <typename T, typename Op>
__global__ void ReduceKernel(const T* x, T* y, IndexMap kept, IndexMap reduced, int64_t out_n,
                             int64_t reduce_n, T init) {
  const Op op;
  for (int64_t o = GlobalThread(); o < out_n; o += GridThreads()) {
    const T* base = x + MapOffset0(kept, o);
    T acc = init;
    if (reduced.rank == 1) {
      const int64_t s = reduced.strides[0][0];
      for (int64_t r = 0; r < reduce_n; ++r) acc = op(acc, base[r * s]);
    } else {
      for (int64_t r = 0; r < reduce_n; ++r) acc = op(acc, base[MapOffset0(reduced, r)]);
    }
    y[o] = acc;
  }
}

template <typename T, typename Op>
cudaError_t Reduce(const void* x, void* y, const IndexMap& kept, const IndexMap& reduced,
                   int64_t out_n, int64_t reduce_n, T init, cudaStream_t stream) {
  ReduceKernel<T, Op><<<GridFor(out_n), kBlock, 0, stream>>>(
      static_cast<const T*>(x), static_cast<T*>(y), kept, reduced, out_n, reduce_n, init);
  return cudaGetLastError();
}

struct ReducedValues {
  const float* base;
  const IndexMap* reduced;
  __device__ float operator()(int64_t r) const { return base[MapOffset0(*reduced, r)]; }
};

// One thread per output, folding its values in order as the CPU does (math_ops.h).
__global__ void FoldReduceKernel(const float* x, float* y, IndexMap kept, IndexMap reduced,
                                 int64_t out_n, int64_t reduce_n, FoldReduce kind) {
  for (int64_t o = GlobalThread(); o < out_n; o += GridThreads()) {
    const ReducedValues values{x + (reduce_n == 0 ? 0 : MapOffset0(kept, o)), &reduced};
    y[o] = FoldReduceValues(kind, reduce_n, values);
  }
}

template <typename T>
cudaError_t ReduceTyped(bool is_max, const void* x, void* y, const IndexMap& kept,
                        const IndexMap& reduced, int64_t out_n, int64_t reduce_n,
                        cudaStream_t stream) {
  // The empty reduction's value: -inf / +inf, or the type's lowest / highest.
  T lowest, highest;
  if constexpr (std::numeric_limits<T>::has_infinity) {
    lowest = -std::numeric_limits<T>::infinity();
    highest = std::numeric_limits<T>::infinity();
  } else {
    lowest = std::numeric_limits<T>::lowest();
    highest = std::numeric_limits<T>::max();
  }
  return is_max ? Reduce<T, MaxOp>(x, y, kept, reduced, out_n, reduce_n, lowest, stream)
                : Reduce<T, MinOp>(x, y, kept, reduced, out_n, reduce_n, highest, stream);
}

template <typename T>
__global__ void ArgMaxKernel(const T* x, int64_t* y, int64_t outer, int64_t n, int64_t inner,
                             bool select_last, bool largest) {
  for (int64_t c = GlobalThread(); c < outer * inner; c += GridThreads()) {
    const int64_t o = c / inner, j = c - o * inner;
    y[c] = ArgMaxRow(x + o * n * inner + j, n, inner, select_last, largest);
  }
}

template <typename T>
__global__ void TopKKernel(const T* x, T* values, int64_t* indices, int64_t outer, int64_t n,
                           int64_t inner, int64_t k, bool largest) {
  for (int64_t c = GlobalThread(); c < outer * inner; c += GridThreads()) {
    const int64_t o = c / inner, j = c - o * inner;
    const int64_t at = o * k * inner + j;
    TopKRow<T>(RankOrder<T>{largest}, values + at, indices + at, inner)
        .Run(x + o * n * inner + j, n, inner, k);
  }
}

template <typename T>
__global__ void CumSumKernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                             bool exclusive, bool reverse) {
  const AddOp add;
  for (int64_t c = GlobalThread(); c < outer * inner; c += GridThreads()) {
    const int64_t o = c / inner, j = c - o * inner;
    const T* xr = x + o * n * inner + j;
    T* yr = y + o * n * inner + j;
    T acc = T(0);
    for (int64_t s = 0; s < n; ++s) {
      const int64_t i = (reverse ? n - 1 - s : s) * inner;
      if (exclusive) {
        yr[i] = acc;
        acc = add(acc, xr[i]);
      } else {
        acc = add(acc, xr[i]);
        yr[i] = acc;
      }
    }
  }
}

__global__ void LogSoftmaxRowsKernel(const float* x, float* y, int64_t rows, int64_t n) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = GridThreads() / 32;
  // The row loop is warp-uniform, so every lane reaches the shuffles.
  for (int64_t row = GlobalThread() / 32; row < rows; row += warps) {
    const float* xr = x + row * n;
    float* yr = y + row * n;
    float mx = -INFINITY;
    for (int64_t i = lane; i < n; i += 32) mx = fmaxf(mx, xr[i]);
    mx = WarpMax(mx);
    float sum = 0.0f;
    for (int64_t i = lane; i < n; i += 32) sum += expf(xr[i] - mx);
    const float lse = logf(WarpSum(sum));
    for (int64_t i = lane; i < n; i += 32) yr[i] = (xr[i] - mx) - lse;
  }
}

__global__ void LogSoftmaxColumnsKernel(const float* x, float* y, int64_t outer, int64_t n,
                                        int64_t inner) {
  for (int64_t c = GlobalThread(); c < outer * inner; c += GridThreads()) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) mx = fmaxf(mx, x[base + i * inner]);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += expf(x[base + i * inner] - mx);
    const float lse = logf(sum);
    for (int64_t i = 0; i < n; ++i) y[base + i * inner] = (x[base + i * inner] - mx) - lse;
  }
}

}  // namespace

cudaError_t LaunchReduceMinMax(bool is_max, ScalarType type, const void* x, void* y,
                               const IndexMap& kept, const IndexMap& reduced, int64_t out_n,
                               int64_t reduce_n, cudaStream_t stream) {
  if (out_n == 0) return cudaSuccess;
  switch (type) {
    case ScalarType::kFp32:
      return ReduceTyped<float>(is_max, x, y, kept, reduced, out_n, reduce_n, stream);
    case ScalarType::kInt32:
      return ReduceTyped<int32_t>(is_max, x, y, kept, reduced, out_n, reduce_n, stream);
    case ScalarType::kInt64:
      return ReduceTyped<int64_t>(is_max, x, y, kept, reduced, out_n, reduce_n, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t LaunchIntegerReduce(bool product, bool int64, const void* x, void* y,
                                const IndexMap& kept, const IndexMap& reduced, int64_t out_n,
                                int64_t reduce_n, cudaStream_t stream) {
  if (out_n == 0) return cudaSuccess;
  if (product) {
    return int64 ? Reduce<int64_t, WrappingProdOp>(x, y, kept, reduced, out_n, reduce_n, 1, stream)
                 : Reduce<int32_t, WrappingProdOp>(x, y, kept, reduced, out_n, reduce_n, 1, stream);
  }
  return int64 ? Reduce<int64_t, WrappingSumOp>(x, y, kept, reduced, out_n, reduce_n, 0, stream)
               : Reduce<int32_t, WrappingSumOp>(x, y, kept, reduced, out_n, reduce_n, 0, stream);
}

cudaError_t LaunchFoldReduce(FoldReduce kind, const float* x, float* y, const IndexMap& kept,
                             const IndexMap& reduced, int64_t out_n, int64_t reduce_n,
                             cudaStream_t stream) {
  if (out_n == 0) return cudaSuccess;
  FoldReduceKernel<<<GridFor(out_n), kBlock, 0, stream>>>(x, y, kept, reduced, out_n, reduce_n,
                                                          kind);
  return cudaGetLastError();
}

cudaError_t LaunchArgMax(ScalarType type, const void* x, int64_t* y, int64_t outer,
                         int64_t axis_dim, int64_t inner, bool select_last, bool largest,
                         cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || axis_dim == 0) return cudaSuccess;
  const unsigned grid = GridFor(rows);
  switch (type) {
    case ScalarType::kFp32:
      ArgMaxKernel<float><<<grid, kBlock, 0, stream>>>(static_cast<const float*>(x), y, outer,
                                                       axis_dim, inner, select_last, largest);
      break;
    case ScalarType::kInt32:
      ArgMaxKernel<int32_t><<<grid, kBlock, 0, stream>>>(static_cast<const int32_t*>(x), y, outer,
                                                         axis_dim, inner, select_last, largest);
      break;
    case ScalarType::kInt64:
      ArgMaxKernel<int64_t><<<grid, kBlock, 0, stream>>>(static_cast<const int64_t*>(x), y, outer,
                                                         axis_dim, inner, select_last, largest);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchTopK(ScalarType type, const void* x, void* values, int64_t* indices,
                       int64_t outer, int64_t axis_dim, int64_t inner, int64_t k, bool largest,
                       cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || k == 0) return cudaSuccess;
  const unsigned grid = GridFor(rows);
  switch (type) {
    case ScalarType::kFp32:
      TopKKernel<float><<<grid, kBlock, 0, stream>>>(static_cast<const float*>(x),
                                                     static_cast<float*>(values), indices, outer,
                                                     axis_dim, inner, k, largest);
      break;
    case ScalarType::kInt32:
      TopKKernel<int32_t><<<grid, kBlock, 0, stream>>>(static_cast<const int32_t*>(x),
                                                       static_cast<int32_t*>(values), indices,
                                                       outer, axis_dim, inner, k, largest);
      break;
    case ScalarType::kInt64:
      TopKKernel<int64_t><<<grid, kBlock, 0, stream>>>(static_cast<const int64_t*>(x),
                                                       static_cast<int64_t*>(values), indices,
                                                       outer, axis_dim, inner, k, largest);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchCumSum(ScalarType type, const void* x, void* y, int64_t outer, int64_t axis_dim,
                         int64_t inner, bool exclusive, bool reverse, cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || axis_dim == 0) return cudaSuccess;
  const unsigned grid = GridFor(rows);
  switch (type) {
    case ScalarType::kFp32:
      CumSumKernel<float><<<grid, kBlock, 0, stream>>>(static_cast<const float*>(x),
                                                       static_cast<float*>(y), outer, axis_dim,
                                                       inner, exclusive, reverse);
      break;
    case ScalarType::kInt32:
      CumSumKernel<int32_t><<<grid, kBlock, 0, stream>>>(static_cast<const int32_t*>(x),
                                                         static_cast<int32_t*>(y), outer, axis_dim,
                                                         inner, exclusive, reverse);
      break;
    case ScalarType::kInt64:
      CumSumKernel<int64_t><<<grid, kBlock, 0, stream>>>(static_cast<const int64_t*>(x),
                                                         static_cast<int64_t*>(y), outer, axis_dim,
                                                         inner, exclusive, reverse);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchLogSoftmax(const float* x, float* y, int64_t outer, int64_t axis_dim,
                             int64_t inner, cudaStream_t stream) {
  if (outer * axis_dim * inner == 0) return cudaSuccess;
  if (inner == 1) {
    LogSoftmaxRowsKernel<<<GridFor(outer * 32), kBlock, 0, stream>>>(x, y, outer, axis_dim);
  } else {
    LogSoftmaxColumnsKernel<<<GridFor(outer * inner), kBlock, 0, stream>>>(x, y, outer, axis_dim,
                                                                           inner);
  }
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
