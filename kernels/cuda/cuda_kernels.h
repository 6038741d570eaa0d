#ifndef NDSERVE_KERNELS_CUDA_CUDA_KERNELS_H_
#define NDSERVE_KERNELS_CUDA_CUDA_KERNELS_H_

// CUDA kernels (compiled only with the CUDA backend). Reach them through dispatch.h, which
// validates every call first; these entry points assume validated views (device pointers
// on ctx.device) and a context from GpuResources. Each queues its work on ctx.cuda_stream
// and returns the launch status (Gather also synchronizes, see dispatch.h). Reentrant
// for distinct streams.

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/kernel_context.h"
#include "kernels/op_attrs.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels::gpu {

#define NDK_DECLARE_CUDA_KERNEL(name)                                              \
  absl::Status name(const KernelContext& ctx, absl::Span<const TensorView> inputs, \
                    absl::Span<const TensorView> outputs, const OpAttrs& attrs)

NDK_DECLARE_CUDA_KERNEL(Gemm);
NDK_DECLARE_CUDA_KERNEL(MatMul);
NDK_DECLARE_CUDA_KERNEL(Add);
NDK_DECLARE_CUDA_KERNEL(Sub);
NDK_DECLARE_CUDA_KERNEL(Mul);
NDK_DECLARE_CUDA_KERNEL(Div);
NDK_DECLARE_CUDA_KERNEL(Relu);
NDK_DECLARE_CUDA_KERNEL(Sigmoid);
NDK_DECLARE_CUDA_KERNEL(Tanh);
NDK_DECLARE_CUDA_KERNEL(Erf);
NDK_DECLARE_CUDA_KERNEL(Softmax);
NDK_DECLARE_CUDA_KERNEL(LayerNormalization);
NDK_DECLARE_CUDA_KERNEL(Gather);
NDK_DECLARE_CUDA_KERNEL(ReduceSum);
NDK_DECLARE_CUDA_KERNEL(ReduceMean);
NDK_DECLARE_CUDA_KERNEL(Concat);
NDK_DECLARE_CUDA_KERNEL(Transpose);
// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the bytes do not move.
NDK_DECLARE_CUDA_KERNEL(CopyInput);
NDK_DECLARE_CUDA_KERNEL(Cast);

#undef NDK_DECLARE_CUDA_KERNEL

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_CUDA_KERNELS_H_
