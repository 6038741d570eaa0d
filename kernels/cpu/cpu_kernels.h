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

#define NDK_DECLARE_CPU_KERNEL(name)                                               \
  absl::Status name(const KernelContext& ctx, absl::Span<const TensorView> inputs, \
                    absl::Span<const TensorView> outputs, const OpAttrs& attrs)

NDK_DECLARE_CPU_KERNEL(Gemm);
NDK_DECLARE_CPU_KERNEL(MatMul);
NDK_DECLARE_CPU_KERNEL(Add);
NDK_DECLARE_CPU_KERNEL(Sub);
NDK_DECLARE_CPU_KERNEL(Mul);
NDK_DECLARE_CPU_KERNEL(Div);
NDK_DECLARE_CPU_KERNEL(Relu);
NDK_DECLARE_CPU_KERNEL(Sigmoid);
NDK_DECLARE_CPU_KERNEL(Tanh);
NDK_DECLARE_CPU_KERNEL(Erf);
NDK_DECLARE_CPU_KERNEL(Softmax);
NDK_DECLARE_CPU_KERNEL(LayerNormalization);
NDK_DECLARE_CPU_KERNEL(Gather);
NDK_DECLARE_CPU_KERNEL(ReduceSum);
NDK_DECLARE_CPU_KERNEL(ReduceMean);
NDK_DECLARE_CPU_KERNEL(Concat);
NDK_DECLARE_CPU_KERNEL(Transpose);
// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the bytes do not move.
NDK_DECLARE_CPU_KERNEL(CopyInput);
NDK_DECLARE_CPU_KERNEL(Cast);

#undef NDK_DECLARE_CPU_KERNEL

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_CPU_KERNELS_H_
