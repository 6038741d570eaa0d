#ifndef NDSERVE_KERNELS_CPU_CPU_KERNELS_H_
#define NDSERVE_KERNELS_CPU_CPU_KERNELS_H_

// CPU kernels. Reach them through dispatch.h, which validates every call first; these
// entry points assume validated views (host pointers) and do no checks of their own
// beyond data-dependent ones (Gather indices). Reentrant.

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/kernel_context.h"
#include "kernels/op_attrs.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels::cpu {

#define NDS_DECLARE_CPU_KERNEL(name)                                               \
  absl::Status name(const KernelContext& ctx, absl::Span<const TensorView> inputs, \
                    absl::Span<const TensorView> outputs, const OpAttrs& attrs)

NDS_DECLARE_CPU_KERNEL(Gemm);
NDS_DECLARE_CPU_KERNEL(MatMul);
NDS_DECLARE_CPU_KERNEL(Add);
NDS_DECLARE_CPU_KERNEL(Sub);
NDS_DECLARE_CPU_KERNEL(Mul);
NDS_DECLARE_CPU_KERNEL(Div);
NDS_DECLARE_CPU_KERNEL(Relu);
NDS_DECLARE_CPU_KERNEL(Sigmoid);
NDS_DECLARE_CPU_KERNEL(Tanh);
NDS_DECLARE_CPU_KERNEL(Erf);
NDS_DECLARE_CPU_KERNEL(Softmax);
NDS_DECLARE_CPU_KERNEL(LayerNormalization);
NDS_DECLARE_CPU_KERNEL(Gather);
NDS_DECLARE_CPU_KERNEL(ReduceSum);
NDS_DECLARE_CPU_KERNEL(ReduceMean);
NDS_DECLARE_CPU_KERNEL(Concat);
NDS_DECLARE_CPU_KERNEL(Transpose);
// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the bytes do not move.
NDS_DECLARE_CPU_KERNEL(CopyInput);
NDS_DECLARE_CPU_KERNEL(Cast);

#undef NDS_DECLARE_CPU_KERNEL

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_CPU_KERNELS_H_
