#ifndef NDSERVE_KERNELS_CUDA_GEMM_LT_H_
#define NDSERVE_KERNELS_CUDA_GEMM_LT_H_

// A row-major FP32 product with its per-column bias and Relu in cuBLASLt's epilogue: one
// kernel where the cuBLAS path (kernels/cuda/gemm.cc) launches up to three (the bias
// broadcast into Y, the product accumulating onto it, the activation pass). At batch 1 a
// model's GPU time is mostly such tiny kernels back to back, so the count is what costs
// (docs/design.md §4.3). g++-compiled; called by gemm.cc only.

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/kernel_context.h"

namespace ndserve::kernels::gpu {

// Y (m x n) = alpha * op(A) op(B) [+ bias[c] on every row] [then Relu], every matrix
// row-major and dense: op(A) is m x k (A stored k x m when trans_a), op(B) k x n.
struct LtProduct {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  const float* a = nullptr;
  const float* b = nullptr;
  float* y = nullptr;
  float alpha = 1.0f;
  const float* bias = nullptr;  // n floats, or null
  GemmActivation activation = GemmActivation::kNone;
};

// Runs `p` as one cublasLtMatmul on the context's stream and returns true; returns false,
// having queued nothing, when the context has no cuBLASLt handle, the epilogue is not one
// cuBLASLt computes exactly as the graph does (only none and Relu are), or cuBLASLt has no
// algorithm for it (the caller then takes the cuBLAS path). The algorithm for a shape is
// chosen once per process and reused, so a warm call costs no heuristic query.
absl::StatusOr<bool> TryLtProduct(const KernelContext& ctx, const LtProduct& p);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_GEMM_LT_H_
