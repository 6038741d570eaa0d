// InstanceNormalization: one block per (n, c) plane, two passes (mean, then centered
// variance) reduced in FP32 through shared memory, the first pass over x - x[0], like the
// CPU kernel (kernels/cpu/instance_norm.cc says why). A block rather than
// a warp per plane: GroupNorm planes hold a group's channels times the image (thousands of
// values or more).
#include <cmath>

#include "kernels/cuda/conv_launchers.h"
#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

// The sum of v over the block (kBlock threads), returned to every thread.
__device__ float BlockSum(float v, float* shared) {
  v = WarpSum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < kBlock / 32 ? shared[lane] : 0.0f;
  v = WarpSum(v);
  __syncthreads();  // shared is reused by the next call
  return v;
}

__global__ void InstanceNormKernel(const float* x, const float* scale, const float* bias,
                                   float* y, int64_t planes, int64_t c, int64_t inner,
                                   float epsilon) {
  __shared__ float shared[kBlock / 32];
  for (int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const float* xp = x + p * inner;
    float* yp = y + p * inner;
    const float pivot = xp[0];
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < inner; i += kBlock) sum += xp[i] - pivot;
    const float m = BlockSum(sum, shared) / static_cast<float>(inner);  // mean - pivot
    float sq = 0.0f;
    for (int64_t i = threadIdx.x; i < inner; i += kBlock) {
      const float d = xp[i] - pivot - m;
      sq += d * d;
    }
    const float var = BlockSum(sq, shared) / static_cast<float>(inner);
    const float a = scale[p % c] / sqrtf(var + epsilon);
    const float b = bias[p % c];
    for (int64_t i = threadIdx.x; i < inner; i += kBlock) yp[i] = (xp[i] - pivot - m) * a + b;
  }
}

}  // namespace

cudaError_t LaunchInstanceNorm(const float* x, const float* scale, const float* bias, float* y,
                               int64_t n, int64_t c, int64_t inner, float epsilon,
                               cudaStream_t stream) {
  const int64_t planes = n * c;
  if (planes == 0 || inner == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(planes < 65535 ? planes : 65535);
  InstanceNormKernel<<<blocks, kBlock, 0, stream>>>(x, scale, bias, y, planes, c, inner, epsilon);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
