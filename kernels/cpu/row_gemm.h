#ifndef NDSERVE_KERNELS_CPU_ROW_GEMM_H_
#define NDSERVE_KERNELS_CPU_ROW_GEMM_H_

// C = A x B for a few rows of A, on the calling thread, without packing: the recurrent
// kernels' per-step product ([batch, hidden] x [hidden, gates * hidden] at small batch).
// There cblas_sgemm repacks the whole B on every call (each time step) and may wake its
// threads for a product of a few microseconds; packing alone was a third of an LSTM's
// time at batch 1 (docs/design.md section 4). Reentrant.

#include <cstdint>

namespace ndserve::kernels::cpu {

// Batches up to this size take RowGemm in the recurrent kernels; larger ones use sgemm,
// whose packing then pays for itself.
inline constexpr int64_t kRowGemmMaxRows = 8;

// C[m, n] (row stride ldc) = A[m, k] (row stride lda) x B[k, n] (row stride ldb).
void RowGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
             int64_t ldb, float* c, int64_t ldc);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_ROW_GEMM_H_
