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

#define NDS_DECLARE_CUDA_KERNEL(name)                                              \
  absl::Status name(const KernelContext& ctx, absl::Span<const TensorView> inputs, \
                    absl::Span<const TensorView> outputs, const OpAttrs& attrs)

NDS_DECLARE_CUDA_KERNEL(Gemm);
NDS_DECLARE_CUDA_KERNEL(MatMul);
NDS_DECLARE_CUDA_KERNEL(Add);
NDS_DECLARE_CUDA_KERNEL(Sub);
NDS_DECLARE_CUDA_KERNEL(Mul);
NDS_DECLARE_CUDA_KERNEL(Div);
NDS_DECLARE_CUDA_KERNEL(Relu);
NDS_DECLARE_CUDA_KERNEL(Sigmoid);
NDS_DECLARE_CUDA_KERNEL(Tanh);
NDS_DECLARE_CUDA_KERNEL(Erf);
NDS_DECLARE_CUDA_KERNEL(Softmax);
NDS_DECLARE_CUDA_KERNEL(LayerNormalization);
NDS_DECLARE_CUDA_KERNEL(Gather);
NDS_DECLARE_CUDA_KERNEL(ReduceSum);
NDS_DECLARE_CUDA_KERNEL(ReduceMean);
NDS_DECLARE_CUDA_KERNEL(Concat);
NDS_DECLARE_CUDA_KERNEL(Transpose);
// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the bytes do not move.
NDS_DECLARE_CUDA_KERNEL(CopyInput);
NDS_DECLARE_CUDA_KERNEL(Cast);

#undef NDS_DECLARE_CUDA_KERNEL

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_CUDA_KERNELS_H_
