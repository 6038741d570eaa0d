// GatherElements and ScatterElements on the device. An out-of-range index never reaches
// memory: GatherElements writes 0 for it, ScatterElements drops its update, and both
// raise the host-mapped error flag for the caller to report.
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/launchers.h"
#include "kernels/elementwise_ops.h"

namespace ndserve::kernels::gpu {
namespace {

// Data offset of index position i, or -1 when its index is out of range.
__device__ __forceinline__ int64_t TargetOf(const void* indices, const ElementsArgs& a, int64_t i) {
  int64_t v = a.int64_indices ? static_cast<const int64_t*>(indices)[i]
                              : static_cast<int64_t>(static_cast<const int32_t*>(indices)[i]);
  if (v < 0) v += a.axis_dim;
  if (v < 0 || v >= a.axis_dim) return -1;
  return MapOffset0(a.base, i) + v * a.axis_stride;
}

template <typename E>
__global__ void GatherElementsKernel(const E* data, const void* indices, E* out, ElementsArgs a,
                                     volatile int32_t* error_flag) {
  for (int64_t i = GlobalThread(); i < a.count; i += GridThreads()) {
    const int64_t at = TargetOf(indices, a, i);
    if (at < 0) {
      out[i] = E(0);
      *error_flag = 1;
      continue;
    }
    out[i] = data[at];
  }
}

template <typename E>
__global__ void ScatterElementsKernel(const void* indices, const E* updates, E* out, ElementsArgs a,
                                      volatile int32_t* error_flag) {
  for (int64_t i = GlobalThread(); i < a.count; i += GridThreads()) {
    const int64_t at = TargetOf(indices, a, i);
    if (at < 0) {
      *error_flag = 1;
      continue;
    }
    out[at] = updates[i];
  }
}

// One thread per line of the axis: only indices on one line can share a target, so each
// target's updates fold in index order.
template <typename T, typename Op>
__global__ void ScatterElementsReduceKernel(const void* indices, const T* updates, T* out,
                                            ElementsArgs a, volatile int32_t* error_flag) {
  const Op op;
  for (int64_t line = GlobalThread(); line < a.lines; line += GridThreads()) {
    const int64_t first = (line / a.inner) * a.line_len * a.inner + line % a.inner;
    for (int64_t j = 0; j < a.line_len; ++j) {
      const int64_t i = first + j * a.inner;
      const int64_t at = TargetOf(indices, a, i);
      if (at < 0) {
        *error_flag = 1;
        continue;
      }
      out[at] = op(out[at], updates[i]);
    }
  }
}

}  // namespace

cudaError_t LaunchGatherElements(const void* data, int elem_bytes, const void* indices, void* out,
                                 const ElementsArgs& a, int32_t* error_flag, cudaStream_t stream) {
  if (a.count == 0) return cudaSuccess;
  return ForElementBytes(elem_bytes, [&](auto tag) {
    using E = decltype(tag);
    GatherElementsKernel<E><<<GridFor(a.count), kBlock, 0, stream>>>(
        static_cast<const E*>(data), indices, static_cast<E*>(out), a, error_flag);
    return cudaGetLastError();
  });
}

cudaError_t LaunchScatterElements(int reduction, ScalarType type, int elem_bytes,
                                  const void* indices, const void* updates, void* out,
                                  const ElementsArgs& a, int32_t* error_flag, cudaStream_t stream) {
  if (a.count == 0) return cudaSuccess;
  if (reduction != 0) {
    return ForNumericType(type, [&](auto tag) {
      using T = decltype(tag);
      const T* u = static_cast<const T*>(updates);
      T* y = static_cast<T*>(out);
      if (reduction == 1) {
        ScatterElementsReduceKernel<T, AddOp>
            <<<GridFor(a.lines), kBlock, 0, stream>>>(indices, u, y, a, error_flag);
      } else {
        ScatterElementsReduceKernel<T, MulOp>
            <<<GridFor(a.lines), kBlock, 0, stream>>>(indices, u, y, a, error_flag);
      }
      return cudaGetLastError();
    });
  }
  return ForElementBytes(elem_bytes, [&](auto tag) {
    using E = decltype(tag);
    ScatterElementsKernel<E><<<GridFor(a.count), kBlock, 0, stream>>>(
        indices, static_cast<const E*>(updates), static_cast<E*>(out), a, error_flag);
    return cudaGetLastError();
  });
}

}  // namespace ndserve::kernels::gpu
