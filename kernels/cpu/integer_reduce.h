#ifndef NDSERVE_KERNELS_CPU_INTEGER_REDUCE_H_
#define NDSERVE_KERNELS_CPU_INTEGER_REDUCE_H_

// ReduceSum of INT32 or INT64 (kernels/cpu/reduce_fold.cc), for the ReduceSum kernel of
// kernels/cpu/reduce.cc, whose own loops are FP32: one output at a time, wrapping on
// overflow as the CUDA kernel does.

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/op_attrs.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels::cpu {

absl::Status IntegerReduceSum(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                              const OpAttrs& attrs);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_INTEGER_REDUCE_H_
