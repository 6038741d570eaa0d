#ifndef NDSERVE_KERNELS_CUDA_GEMM_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_GEMM_LAUNCHERS_H_

// The raw launcher of a fused Gemm / MatMul epilogue (kernels/gemm_epilogue.h), called by
// kernels/cuda/gemm.cc after the cuBLAS product. Conventions as launchers.h: plain
// pointers in, cudaError_t out, queued on `stream`. Reentrant.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/gemm_epilogue.h"

namespace ndserve::kernels::gpu {

// y[r, c] = epilogue(y[r, c] + bias[c]) over a row-major rows x cols matrix, in place;
// bias may be null (then no bias is added).
cudaError_t LaunchGemmEpilogue(float* y, const float* bias, int64_t rows, int64_t cols,
                               const GemmEpilogue& epilogue, cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_GEMM_LAUNCHERS_H_
