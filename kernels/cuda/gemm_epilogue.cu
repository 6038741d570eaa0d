// The epilogue of fused Gemm / MatMul nodes on the GPU: one elementwise pass over the
// cuBLAS product adding the per-column bias and applying the activation, with the same
// functor (kernels/gemm_epilogue.h) the CPU kernel uses.
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/gemm_launchers.h"

namespace ndserve::kernels::gpu {
namespace {

__global__ void GemmEpilogueKernel(float* y, const float* bias, int64_t cols, int64_t n,
                                   GemmEpilogue e) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float v = bias != nullptr ? y[i] + bias[i % cols] : y[i];
    y[i] = e(v);
  }
}

}  // namespace

cudaError_t LaunchGemmEpilogue(float* y, const float* bias, int64_t rows, int64_t cols,
                               const GemmEpilogue& epilogue, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  GemmEpilogueKernel<<<GridFor(n), kBlock, 0, stream>>>(y, bias, cols, n, epilogue);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
