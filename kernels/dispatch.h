#ifndef NDSERVE_KERNELS_DISPATCH_H_
#define NDSERVE_KERNELS_DISPATCH_H_

// The dispatch table: (OpKind, device kind) -> kernel, built from kernels/ops.def.
//
// Contract of every kernel:
//  - Inputs are the node's data inputs in ONNX order (shape-deciding inputs live in the
//    attribute struct, see op_attrs.h); outputs are preallocated by the caller with the
//    types and shapes InferOutputs gives (a prefix of them for LayerNormalization). Each
//    call is validated first (ValidateKernelCall): a mismatch is INVALID_ARGUMENT naming
//    the op and the shapes, never a crash or an out-of-bounds access.
//  - Kernels allocate no device memory and keep no pointer past the call. The CPU ones
//    may use small host scratch (Softmax over a non-last axis).
//  - Outputs must not overlap inputs, except that an output may be exactly its input
//    (same pointer) for the shape-only ops (Reshape, Flatten, Squeeze, Unsqueeze,
//    Identity: then no copy is made) and for same-shape elementwise ops.
//  - CUDA kernels are queued on ctx.cuda_stream and return before running, with any
//    launch error as a Status. Exception: Gather synchronizes the stream to read
//    ctx.error_flag and return INVALID_ARGUMENT for an out-of-range index (device code
//    writes zeros for such rows instead of reading out of bounds), unless
//    ctx.defer_error_check: then the caller reads the flag after its own synchronization.
//  - No CUDA or cuBLAS call is made unless a CUDA kernel is called, which needs a CUDA
//    context (GpuResources) and therefore a device.
// Thread-safety: the table is immutable; kernels are reentrant. Concurrent calls may
// share a KernelContext only on CPU (a CUDA context belongs to one stream's user).

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/kernel_context.h"
#include "kernels/op_attrs.h"
#include "kernels/op_kind.h"
#include "kernels/tensor_view.h"
#include "memory/device.h"

namespace ndserve::kernels {

using KernelFn = absl::Status (*)(const KernelContext& ctx, absl::Span<const TensorView> inputs,
                                  absl::Span<const TensorView> outputs, const OpAttrs& attrs);

// The kernel of `op` for `device`'s kind. UNIMPLEMENTED naming the op and device when
// there is none (any CUDA op in a build without the CUDA backend). The returned function
// validates each call (ValidateKernelCall) before it touches memory.
absl::StatusOr<KernelFn> Lookup(OpKind op, Device device);

// What every kernel checks before running: ctx.device matches every view's device, data
// pointers are set for non-empty tensors, the inputs are acceptable to InferOutputs and
// the outputs have exactly the types and shapes it infers.
absl::Status ValidateKernelCall(OpKind op, const KernelContext& ctx,
                                absl::Span<const TensorView> inputs,
                                absl::Span<const TensorView> outputs, const OpAttrs& attrs);

// Lookup(op, ctx.device) and call it.
absl::Status RunKernel(OpKind op, const KernelContext& ctx, absl::Span<const TensorView> inputs,
                       absl::Span<const TensorView> outputs, const OpAttrs& attrs);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_DISPATCH_H_
