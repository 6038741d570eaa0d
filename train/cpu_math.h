#ifndef NDSERVE_TRAIN_CPU_MATH_H_
#define NDSERVE_TRAIN_CPU_MATH_H_

// The CPU loops the autograd ops share: broadcasting, GEMM (OpenBLAS) and a few
// whole-array helpers. FP32 only: training runs in FP32 (docs/design.md §10).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/nd_array.h"
#include "memory/nd_manager.h"

namespace ndserve::train {

using Dims = std::vector<std::int64_t>;

std::int64_t NumElements(absl::Span<const std::int64_t> shape);

// The raw FP32 pointer of an array (INVALID_ARGUMENT for another dtype, freed error).
absl::StatusOr<float*> F32(const NDArray& array);

// A new FP32 array in `scope`.
absl::StatusOr<NDArray> NewF32(NDManager& scope, absl::Span<const std::int64_t> shape);
absl::StatusOr<NDArray> ZerosF32(NDManager& scope, absl::Span<const std::int64_t> shape);

// NumPy broadcasting of two shapes; INVALID_ARGUMENT naming both when they do not.
absl::StatusOr<Dims> BroadcastShapes(absl::Span<const std::int64_t> a,
                                     absl::Span<const std::int64_t> b);

// The element offsets into an input of shape `in` for every element of `out` (which
// `in` broadcasts to), in order.
std::vector<std::int64_t> BroadcastOffsets(absl::Span<const std::int64_t> in,
                                           absl::Span<const std::int64_t> out);

// grad (shape `out`) summed down to shape `in`, written (or added when `accumulate`)
// into dst.
void ReduceToShape(const float* grad, absl::Span<const std::int64_t> out,
                   absl::Span<const std::int64_t> in, float* dst, bool accumulate);

// C[m,n] = alpha * op(A) op(B) + beta * C, row-major; lda/ldb are the stored widths.
void Sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
           float alpha, const float* a, const float* b, float beta, float* c);

// A possibly negative ONNX axis made non-negative; INVALID_ARGUMENT naming `op` when it
// is outside [-rank, rank).
absl::StatusOr<std::int64_t> NormAxis(std::int64_t axis, std::size_t rank, const char* op);

// dst = src, or dst += src.
void Store(float* dst, const float* src, std::int64_t n, bool accumulate);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_CPU_MATH_H_
