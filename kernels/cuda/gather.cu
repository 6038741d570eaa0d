// Gather along one axis. An out-of-range index never reads out of bounds: its row is
// written as zeros and the host-mapped error flag is raised for the launcher to report.
#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

template <typename E, typename I>
__global__ void GatherKernel(const E* data, const I* indices, E* out, int64_t axis_dim,
                             int64_t inner, int64_t count, int64_t total,
                             volatile int32_t* error_flag) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t c = i % inner;
    const int64_t t = i / inner;
    const int64_t j = t % count;
    const int64_t o = t / count;
    int64_t v = static_cast<int64_t>(indices[j]);
    if (v < 0) v += axis_dim;
    if (v < 0 || v >= axis_dim) {
      out[i] = E(0);
      *error_flag = 1;
      continue;
    }
    out[i] = data[(o * axis_dim + v) * inner + c];
  }
}

template <typename E>
cudaError_t Launch(const void* data, const void* indices, bool int64_indices, void* out,
                   int64_t axis_dim, int64_t inner, int64_t count, int64_t total,
                   int32_t* error_flag, cudaStream_t stream) {
  const unsigned grid = GridFor(total);
  if (int64_indices) {
    GatherKernel<E, int64_t><<<grid, kBlock, 0, stream>>>(
        static_cast<const E*>(data), static_cast<const int64_t*>(indices), static_cast<E*>(out),
        axis_dim, inner, count, total, error_flag);
  } else {
    GatherKernel<E, int32_t><<<grid, kBlock, 0, stream>>>(
        static_cast<const E*>(data), static_cast<const int32_t*>(indices), static_cast<E*>(out),
        axis_dim, inner, count, total, error_flag);
  }
  return cudaGetLastError();
}

// One thread per output: its bag's rows summed in bag order, then scaled, as Gather +
// ReduceMean would (to rounding: the CUDA ReduceMean may sum in another order).
template <typename I>
__global__ void BagMeanKernel(const float* table, const I* ids, float* out, int64_t rows,
                              int64_t dim, int64_t bag, int64_t stride, int64_t total, float scale,
                              volatile int32_t* error_flag) {
  for (int64_t i = GlobalThread(); i < total; i += GridThreads()) {
    const int64_t d = i % dim;
    const I* bag_ids = ids + (i / dim) * stride;
    float sum = 0.0f;
    bool bad = false;
    for (int64_t k = 0; k < bag; ++k) {
      int64_t v = static_cast<int64_t>(bag_ids[k]);
      if (v < 0) v += rows;
      if (v < 0 || v >= rows) {
        bad = true;
        break;
      }
      sum = k == 0 ? table[v * dim + d] : sum + table[v * dim + d];
    }
    if (bad) {
      out[i] = 0.0f;
      *error_flag = 1;
      continue;
    }
    out[i] = sum * scale;  // an empty bag: 0, as ReduceMean gives
  }
}

}  // namespace

cudaError_t LaunchBagMean(const float* table, const void* ids, bool int64_ids, float* out,
                          int64_t rows, int64_t dim, int64_t batch, int64_t bag, int64_t stride,
                          int32_t* error_flag, cudaStream_t stream) {
  const int64_t total = batch * dim;
  if (total == 0) return cudaSuccess;
  const float scale = bag == 0 ? 0.0f : 1.0f / static_cast<float>(bag);  // as ReduceMean
  const unsigned grid = GridFor(total);
  if (int64_ids) {
    BagMeanKernel<int64_t><<<grid, kBlock, 0, stream>>>(table, static_cast<const int64_t*>(ids),
                                                        out, rows, dim, bag, stride, total, scale,
                                                        error_flag);
  } else {
    BagMeanKernel<int32_t><<<grid, kBlock, 0, stream>>>(table, static_cast<const int32_t*>(ids),
                                                        out, rows, dim, bag, stride, total, scale,
                                                        error_flag);
  }
  return cudaGetLastError();
}

cudaError_t LaunchGather(const void* data, int elem_bytes, const void* indices, bool int64_indices,
                         void* out, int64_t outer, int64_t axis_dim, int64_t inner, int64_t count,
                         int32_t* error_flag, cudaStream_t stream) {
  const int64_t total = outer * count * inner;
  if (total == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return Launch<uint8_t>(data, indices, int64_indices, out, axis_dim, inner, count, total,
                             error_flag, stream);
    case 2:
      return Launch<uint16_t>(data, indices, int64_indices, out, axis_dim, inner, count, total,
                              error_flag, stream);
    case 4:
      return Launch<uint32_t>(data, indices, int64_indices, out, axis_dim, inner, count, total,
                              error_flag, stream);
    case 8:
      return Launch<uint64_t>(data, indices, int64_indices, out, axis_dim, inner, count, total,
                              error_flag, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ndserve::kernels::gpu
