// Writes a handful of INT64 values given by value at launch: the device side of Shape and
// Size. One block; the values never exceed kMaxShapeValues.
#include "kernels/cuda/shape_of_launchers.h"

namespace ndserve::kernels::gpu {
namespace {

__global__ void WriteInt64sKernel(Int64Values values, int64_t* out) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < values.n) out[i] = values.v[i];
}

}  // namespace

cudaError_t LaunchWriteInt64s(const Int64Values& values, int64_t* out, cudaStream_t stream) {
  if (values.n <= 0) return cudaSuccess;
  WriteInt64sKernel<<<1, kMaxShapeValues, 0, stream>>>(values, out);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
