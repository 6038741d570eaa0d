// ScatterND on the device, after the caller copied data into the output. Without a
// reduction one thread per (tuple, element) writes its update: a repeated tuple's winner
// is whichever lands last, which ONNX leaves open. With one, one thread per slice element
// walks the tuples in order, so sums and products round as on the CPU. An out-of-range
// coordinate raises *error_flag and its update is dropped.
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/elementwise_ops.h"

namespace ndserve::kernels::gpu {
namespace {

// The tuple's first slice element in the output, or -1 when a coordinate is out of range.
__device__ __forceinline__ int64_t SliceOffset(const int64_t* idx, const ScatterNDArgs& a,
                                               int64_t t) {
  int64_t slices = 0;
  for (int i = 0; i < a.k; ++i) {
    int64_t v = idx[t * a.k + i];
    if (v < 0) v += a.dims[i];
    if (v < 0 || v >= a.dims[i]) return -1;
    slices += v * a.slice_strides[i];
  }
  return slices * a.slice;
}

template <typename E>
__global__ void ScatterKernel(const int64_t* idx, const E* updates, E* out, ScatterNDArgs a,
                              int64_t total, volatile int32_t* error_flag) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t t = i / a.slice, j = i % a.slice;
    const int64_t offset = SliceOffset(idx, a, t);
    if (offset < 0) {
      *error_flag = 1;
      continue;
    }
    out[offset + j] = updates[i];
  }
}

template <typename T, typename Op>
__global__ void ScatterReduceKernel(const int64_t* idx, const T* updates, T* out, ScatterNDArgs a,
                                    volatile int32_t* error_flag) {
  const Op op;
  for (int64_t j = GlobalThread(); j < a.slice; j += GridThreads()) {
    for (int64_t t = 0; t < a.tuples; ++t) {
      const int64_t offset = SliceOffset(idx, a, t);
      if (offset < 0) {
        *error_flag = 1;
        continue;
      }
      out[offset + j] = op(out[offset + j], updates[t * a.slice + j]);
    }
  }
}

template <typename Op>
cudaError_t LaunchReduce(ScalarType type, const int64_t* idx, const void* updates, void* out,
                         const ScatterNDArgs& a, int32_t* error_flag, cudaStream_t stream) {
  return ForNumericType(type, [&](auto tag) {
    using T = decltype(tag);
    ScatterReduceKernel<T, Op><<<GridFor(a.slice), kBlock, 0, stream>>>(
        idx, static_cast<const T*>(updates), static_cast<T*>(out), a, error_flag);
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t LaunchScatterND(int reduction, ScalarType type, int elem_bytes, const int64_t* indices,
                            const void* updates, void* out, const ScatterNDArgs& a,
                            int32_t* error_flag, cudaStream_t stream) {
  if (a.tuples == 0 || a.slice == 0) return cudaSuccess;
  if (reduction == 1)
    return LaunchReduce<AddOp>(type, indices, updates, out, a, error_flag, stream);
  if (reduction == 2)
    return LaunchReduce<MulOp>(type, indices, updates, out, a, error_flag, stream);
  return ForElementBytes(elem_bytes, [&](auto tag) {
    using E = decltype(tag);
    const int64_t total = a.tuples * a.slice;
    ScatterKernel<E><<<GridFor(total), kBlock, 0, stream>>>(
        indices, static_cast<const E*>(updates), static_cast<E*>(out), a, total, error_flag);
    return cudaGetLastError();
  });
}

}  // namespace ndserve::kernels::gpu
