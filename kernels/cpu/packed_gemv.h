#ifndef NDSERVE_KERNELS_CPU_PACKED_GEMV_H_
#define NDSERVE_KERNELS_CPU_PACKED_GEMV_H_

// PackedGemm's form for a few rows against a packed B: a CNN's classifier at batch 1
// ([1 x 1280] x [1280 x 1000] in mobilenet_v2) streams B once and does one multiply-add
// per float of it, so its speed is the memory's. The micro-kernel's 6- or 12-row tiles
// would mostly multiply zero rows of A, at 12 GFLOP/s for that product on one thread; here
// each 16-wide panel of B is read once for every row of A, its products summed in
// independent chains so the FMA latency does not bound the stream (docs/design.md §4.4).
// Internal to kernels/cpu: PackedGemm calls it.

#include <cstdint>

#include "kernels/cpu/packed_gemm.h"

namespace ndserve::kernels::cpu {

inline constexpr int64_t kPackedGemvMaxRows = 4;

// C[m x n] (row stride ldc) = A x B, or += when `accumulate`, for 0 < m <=
// kPackedGemvMaxRows, `b` the packed B (k x n) and `a` A (m x k); `epilogue` as
// PackedGemm's, once per finished block. Splits B's panels over ParallelFor.
void PackedGemv(const PackedMatrix& b, MatrixRef a, int64_t m, int64_t n, int64_t k, float* c,
                int64_t ldc, bool accumulate, PackedEpilogue epilogue);

// PackedGemv calls since the process started, so tests can tell that a product took this
// path rather than the tiles (both give correct numbers; only the speed differs).
uint64_t PackedGemvCalls();

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_PACKED_GEMV_H_
