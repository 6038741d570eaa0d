// NonZero on the CPU: one pass counts, the output [rank, count] is allocated through
// KernelContext::outputs (its count is known only now, ops.def kOpDataShape), and a second
// pass writes each non-zero element's coordinates in row-major order, as numpy.nonzero
// stacks them. A float is non-zero by value (-0 is zero, NaN is not); integers and BOOL
// by their bits, so one instance serves every integer type of a width.
#include <cstdint>

#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"

namespace ndserve::kernels::cpu {
namespace {

template <typename T>
int64_t CountNonZero(const T* x, int64_t n) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += x[i] != T(0);
  return count;
}

// y is [rank, count]: row d holds coordinate d of each non-zero element.
template <typename T>
void WriteCoordinates(const T* x, ShapeSpan dims, int64_t count, int64_t* y) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int64_t n = NumElements(dims);
  Shape coord(rank, 0);
  int64_t j = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] != T(0)) {
      for (int64_t d = 0; d < rank; ++d) y[d * count + j] = coord[d];
      ++j;
    }
    for (int64_t d = rank - 1; d >= 0 && ++coord[d] == dims[d]; --d) coord[d] = 0;
  }
}

template <typename T>
absl::Status Run(const KernelContext& ctx, const TensorView& x) {
  const T* v = x.as<const T>();
  // A 0-d input reads as one element of a 1-D tensor (InferNonZero's [1, count]).
  const Shape dims = x.shape.empty() ? Shape{1} : x.shape;
  const int64_t count = CountNonZero(v, x.numel());
  const int64_t rank = static_cast<int64_t>(dims.size());
  NDS_ASSIGN_OR_RETURN(TensorView y, ctx.outputs->Allocate(0, Shape{rank, count}));
  if (count > 0) WriteCoordinates(v, dims, count, y.as<int64_t>());
  return absl::OkStatus();
}

}  // namespace

absl::Status NonZero(const KernelContext& ctx, absl::Span<const TensorView> in,
                     absl::Span<const TensorView>, const OpAttrs&) {
  const TensorView& x = in[0];
  switch (x.dtype) {
    case DType::kFp32:
      return Run<float>(ctx, x);
    case DType::kInt32:
      return Run<uint32_t>(ctx, x);
    case DType::kInt64:
      return Run<uint64_t>(ctx, x);
    default:  // BOOL, UINT8, INT8 (InferNonZero admits no other)
      return Run<uint8_t>(ctx, x);
  }
}

}  // namespace ndserve::kernels::cpu
