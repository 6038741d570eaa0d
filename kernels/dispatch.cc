#include "kernels/dispatch.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/shape_inference.h"
#include "base/status_macros.h"
#include "memory/cuda_runtime.h"
#ifdef NDSERVE_WITH_CUDA
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace ndserve::kernels {
namespace {

// Every table entry is Checked<...>: the validation runs once here for all kernels, so no
// kernel can be reached with shapes it was not written for.
template <OpKind op, DeviceKind kind, KernelFn impl>
absl::Status Checked(const KernelContext& ctx, absl::Span<const TensorView> inputs,
                     absl::Span<const TensorView> outputs, const OpAttrs& attrs) {
  if (ctx.device.kind != kind) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpKindName(op), ": kernel for ", kind == DeviceKind::kCpu ? "cpu" : "cuda",
                     " called with a context on ", ctx.device.ToString()));
  }
  NDS_RETURN_IF_ERROR(ValidateKernelCall(op, ctx, inputs, outputs, attrs));
  return impl(ctx, inputs, outputs, attrs);
}

// X(op, kernel function name) for every op; the shape-only ops share one copy kernel.
// clang-format off
#define NDS_FOR_EACH_KERNEL(X) \
  X(kGemm, Gemm) \
  X(kMatMul, MatMul) \
  X(kAdd, Add) \
  X(kSub, Sub) \
  X(kMul, Mul) \
  X(kDiv, Div) \
  X(kRelu, Relu) \
  X(kSigmoid, Sigmoid) \
  X(kTanh, Tanh) \
  X(kErf, Erf) \
  X(kSoftmax, Softmax) \
  X(kLayerNormalization, LayerNormalization) \
  X(kGather, Gather) \
  X(kReduceSum, ReduceSum) \
  X(kReduceMean, ReduceMean) \
  X(kConcat, Concat) \
  X(kReshape, CopyInput) \
  X(kFlatten, CopyInput) \
  X(kTranspose, Transpose) \
  X(kUnsqueeze, CopyInput) \
  X(kSqueeze, CopyInput) \
  X(kIdentity, CopyInput) \
  X(kCast, Cast)
// clang-format on

KernelFn CpuKernel(OpKind op) {
  switch (op) {
#define NDS_CPU_CASE(op_kind, fn) \
  case OpKind::op_kind:           \
    return &Checked<OpKind::op_kind, DeviceKind::kCpu, &cpu::fn>;
    NDS_FOR_EACH_KERNEL(NDS_CPU_CASE)
#undef NDS_CPU_CASE
  }
  return nullptr;
}

KernelFn CudaKernel(OpKind op) {
#ifdef NDSERVE_WITH_CUDA
  switch (op) {
#define NDS_CUDA_CASE(op_kind, fn) \
  case OpKind::op_kind:            \
    return &Checked<OpKind::op_kind, DeviceKind::kCuda, &gpu::fn>;
    NDS_FOR_EACH_KERNEL(NDS_CUDA_CASE)
#undef NDS_CUDA_CASE
  }
#endif
  (void)op;
  return nullptr;
}

}  // namespace

absl::StatusOr<KernelFn> Lookup(OpKind op, Device device) {
  const KernelFn fn = device.kind == DeviceKind::kCpu ? CpuKernel(op) : CudaKernel(op);
  if (fn == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "no kernel for ", OpKindName(op), " on ", device.kind == DeviceKind::kCpu ? "cpu" : "cuda",
        device.is_cuda() && !CudaBuilt() ? " (built without CUDA)" : ""));
  }
  return fn;
}

absl::Status ValidateKernelCall(OpKind op, const KernelContext& ctx,
                                absl::Span<const TensorView> inputs,
                                absl::Span<const TensorView> outputs, const OpAttrs& attrs) {
  std::vector<TensorDesc> in_descs;
  in_descs.reserve(inputs.size());
  auto check_view = [&](const TensorView& v, absl::string_view role, std::size_t i) {
    if (v.device != ctx.device) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s %d is on %s, the kernel runs on %s", OpKindName(op), role, i,
                          v.device.ToString(), ctx.device.ToString()));
    }
    if (v.data == nullptr && NumElements(v.shape) != 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s %d has no data", OpKindName(op), role, i));
    }
    return absl::OkStatus();
  };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    in_descs.push_back(inputs[i].desc());
  }
  NDS_ASSIGN_OR_RETURN(const std::vector<TensorDesc> expected, InferOutputs(op, in_descs, attrs));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    NDS_RETURN_IF_ERROR(check_view(inputs[i], "input", i));
  }
  if (outputs.empty() || outputs.size() > expected.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: got %d outputs, expected 1 to %d", OpKindName(op), outputs.size(), expected.size()));
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    NDS_RETURN_IF_ERROR(ValidateShape(outputs[i].shape, absl::StrCat(OpKindName(op), " output")));
    if (!(outputs[i].desc() == expected[i])) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: output %d is %s, expected %s", OpKindName(op), i,
                          outputs[i].desc().ToString(), expected[i].ToString()));
    }
    NDS_RETURN_IF_ERROR(check_view(outputs[i], "output", i));
  }
  return absl::OkStatus();
}

absl::Status RunKernel(OpKind op, const KernelContext& ctx, absl::Span<const TensorView> inputs,
                       absl::Span<const TensorView> outputs, const OpAttrs& attrs) {
  NDS_ASSIGN_OR_RETURN(const KernelFn fn, Lookup(op, ctx.device));
  return fn(ctx, inputs, outputs, attrs);
}

}  // namespace ndserve::kernels
