// GatherND on the device: one thread per output element finds its tuple's slice and copies
// one element. An out-of-range coordinate never reaches memory: the element is 0 and the
// host-mapped error flag is raised for the caller to report.
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/gather_nd_launchers.h"

namespace ndserve::kernels::gpu {
namespace {

// Tuple g's first slice element in data, or -1 when a coordinate is out of range.
__device__ __forceinline__ int64_t TupleOffset(const int64_t* idx, const GatherNDArgs& a,
                                               int64_t g) {
  int64_t at = (g / a.per_batch) * a.batch_stride;
  for (int i = 0; i < a.k; ++i) {
    int64_t v = idx[g * a.k + i];
    if (v < 0) v += a.dims[i];
    if (v < 0 || v >= a.dims[i]) return -1;
    at += v * a.strides[i];
  }
  return at;
}

// `per` = max(slice, 1) threads per tuple, so a tuple of an empty slice is still checked.
template <typename E>
__global__ void GatherNDKernel(const E* data, const int64_t* idx, E* out, GatherNDArgs a,
                               int64_t per, int64_t total, volatile int32_t* error_flag) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t g = i / per, j = i - g * per;
    const int64_t at = TupleOffset(idx, a, g);
    if (at < 0) {
      *error_flag = 1;
      if (a.slice > 0) out[i] = E(0);
      continue;
    }
    if (a.slice > 0) out[i] = data[at + j];
  }
}

}  // namespace

cudaError_t LaunchGatherND(const void* data, int elem_bytes, const int64_t* indices, void* out,
                           const GatherNDArgs& a, int32_t* error_flag, cudaStream_t stream) {
  if (a.tuples == 0) return cudaSuccess;
  const int64_t per = a.slice > 0 ? a.slice : 1;
  const int64_t total = a.tuples * per;
  return ForElementBytes(elem_bytes, [&](auto tag) {
    using E = decltype(tag);
    GatherNDKernel<E><<<GridFor(total), kBlock, 0, stream>>>(
        static_cast<const E*>(data), indices, static_cast<E*>(out), a, per, total, error_flag);
    return cudaGetLastError();
  });
}

}  // namespace ndserve::kernels::gpu
