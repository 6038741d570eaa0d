#include "kernels/dispatch.h"

#include <algorithm>
#include <array>
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

namespace cpu {
absl::Status NoKernel(const KernelContext&, absl::Span<const TensorView>,
                      absl::Span<const TensorView>, const OpAttrs&) {
  return absl::UnimplementedError("no CPU kernel");
}
}  // namespace cpu
#ifdef NDSERVE_WITH_CUDA
namespace gpu {
absl::Status NoKernel(const KernelContext&, absl::Span<const TensorView>,
                      absl::Span<const TensorView>, const OpAttrs&) {
  return absl::UnimplementedError("no CUDA kernel");
}
}  // namespace gpu
#endif

namespace {

// Stands between a kOpDataShape kernel and the engine's allocator: each output is
// allocated once, with the inferred rank and every dim the rules fixed, on the kernel's
// device and of the inferred type, so such a kernel is held to its rules as the others are.
class CheckedOutputs : public OutputAllocator {
 public:
  CheckedOutputs(OpKind op, const KernelContext& ctx, std::vector<TensorDesc> expected)
      : op_(op), ctx_(ctx), expected_(std::move(expected)), given_(expected_.size(), false) {}

  absl::StatusOr<TensorView> Allocate(int index, ShapeSpan shape) override {
    if (index < 0 || index >= static_cast<int>(expected_.size()) || given_[index]) {
      return absl::InternalError(
          absl::StrFormat("%s: output %d allocated twice or out of range", OpKindName(op_), index));
    }
    const TensorDesc& want = expected_[index];
    bool fits = shape.size() == want.shape.size();
    for (std::size_t i = 0; fits && i < shape.size(); ++i) {
      fits = want.shape[i] == kDataDependentDim ? shape[i] >= 0 : shape[i] == want.shape[i];
    }
    if (!fits) {
      return absl::InternalError(absl::StrFormat("%s: output %d allocated as %s, inferred %s",
                                                 OpKindName(op_), index, ShapeToString(shape),
                                                 ShapeToString(want.shape)));
    }
    NDS_RETURN_IF_ERROR(ValidateShape(shape, absl::StrCat(OpKindName(op_), " output")));
    NDS_ASSIGN_OR_RETURN(TensorView view, ctx_.outputs->Allocate(index, shape));
    if (view.dtype != want.dtype || view.device != ctx_.device || !std::equal(view.shape.begin(), view.shape.end(), shape.begin(), shape.end()) ||
        (view.data == nullptr && NumElements(shape) != 0)) {
      return absl::InternalError(absl::StrFormat("%s: output %d was allocated as %s on %s",
                                                 OpKindName(op_), index, view.desc().ToString(),
                                                 view.device.ToString()));
    }
    given_[index] = true;
    return view;
  }

 private:
  const OpKind op_;
  const KernelContext& ctx_;
  const std::vector<TensorDesc> expected_;
  std::vector<bool> given_;
};

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
  if (GetOpInfo(op).data_shape) {
    std::vector<TensorDesc> descs;
    for (const TensorView& v : inputs) descs.push_back(v.desc());
    NDS_ASSIGN_OR_RETURN(std::vector<TensorDesc> expected, InferOutputs(op, descs, attrs));
    CheckedOutputs checked(op, ctx, std::move(expected));
    KernelContext inner = ctx;
    inner.outputs = &checked;
    return impl(inner, inputs, outputs, attrs);
  }
  return impl(ctx, inputs, outputs, attrs);
}

// The kernel `impl` of `op` on `kind`, validated, or null where ops.def names NoKernel.
template <OpKind op, DeviceKind kind, KernelFn impl, KernelFn none>
KernelFn Entry() {
  return impl == none ? nullptr : &Checked<op, kind, impl>;
}

struct KernelPair {
  KernelFn cpu = nullptr;
  KernelFn cuda = nullptr;
};

#ifdef NDSERVE_WITH_CUDA
#define NDS_CUDA_ENTRY(name, fn) Entry<OpKind::k##name, DeviceKind::kCuda, &gpu::fn, &gpu::NoKernel>()
#else
#define NDS_CUDA_ENTRY(name, fn) nullptr
#endif

// Both devices' kernels of each op, in OpKind order, straight from ops.def.
const std::array<KernelPair, kNumOpKinds>& Table() {
  static const std::array<KernelPair, kNumOpKinds> table = {{
#define NDS_OP(name, since, rules, cpu_fn, cuda_fn, host, flags)                      \
  {Entry<OpKind::k##name, DeviceKind::kCpu, &cpu::cpu_fn, &cpu::NoKernel>(), \
   NDS_CUDA_ENTRY(name, cuda_fn)},
#include "kernels/ops.def"
#undef NDS_OP
  }};
  return table;
}

#undef NDS_CUDA_ENTRY

}  // namespace

absl::StatusOr<KernelFn> Lookup(OpKind op, Device device) {
  const auto i = static_cast<std::size_t>(op);
  const KernelFn fn = i >= Table().size()                ? nullptr
                      : device.kind == DeviceKind::kCpu ? Table()[i].cpu
                                                        : Table()[i].cuda;
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
  // An op that reads only shapes (Shape, Size) may be given an input that lives on
  // another device, or no data at all: the engine runs it on the host for device tensors.
  if (!GetOpInfo(op).reads_shapes_only) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      NDS_RETURN_IF_ERROR(check_view(inputs[i], "input", i));
    }
  }
  if (GetOpInfo(op).data_shape) {
    // Its outputs come from ctx.outputs once the kernel knows their dims (CheckedOutputs).
    if (!outputs.empty() || ctx.outputs == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: its output shape depends on the data, so it takes no preallocated outputs and "
          "needs an output allocator in its context",
          OpKindName(op)));
    }
    return absl::OkStatus();
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
