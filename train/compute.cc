#include "train/compute.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "kernels/dispatch.h"
#include "kernels/shape_inference.h"
#include "train/array_helpers.h"

namespace ndserve::train {
namespace {

thread_local const kernels::KernelContext* current_context = nullptr;

const kernels::KernelContext& CpuContext() {
  static const kernels::KernelContext cpu = kernels::KernelContext::Cpu();
  return cpu;
}

// Kernel working space as byte arrays of the step's batch manager: they live until the
// step's scope closes, after the step's last synchronization, so queued CUDA work may
// still use them after the call returns.
class ScopeScratch final : public kernels::ScratchAllocator {
 public:
  explicit ScopeScratch(NDManager& scope) : scope_(scope) {}
  absl::StatusOr<void*> Allocate(std::size_t bytes) override {
    const auto n = static_cast<std::int64_t>(std::max<std::size_t>(bytes, 1));
    NDS_ASSIGN_OR_RETURN(NDArray block,
                         scope_.Create(absl::MakeConstSpan(&n, 1), DType::kUint8, "scratch"));
    return block.Data();
  }

 private:
  NDManager& scope_;
};

// FAILED_PRECONDITION naming both devices when `what` is not on the step's device.
absl::Status OnStepDevice(Device device, const kernels::KernelContext& ctx,
                          absl::string_view what) {
  if (device == ctx.device) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      what, " is on ", device.ToString(), " but the step runs on ", ctx.device.ToString()));
}

}  // namespace

ComputeScope::ComputeScope(const kernels::KernelContext& ctx) : previous_(current_context) {
  current_context = &ctx;
}

ComputeScope::~ComputeScope() { current_context = previous_; }

const kernels::KernelContext& CurrentContext() {
  return current_context != nullptr ? *current_context : CpuContext();
}

absl::StatusOr<const kernels::TrainKernels*> MathFor(std::initializer_list<const NDArray*> arrays) {
  const kernels::KernelContext& ctx = CurrentContext();
  for (const NDArray* a : arrays) {
    if (a != nullptr && !a->is_null()) {
      NDS_RETURN_IF_ERROR(OnStepDevice(a->device(), ctx, absl::StrCat("array ", a->DebugString())));
    }
  }
  return kernels::LookupTrainKernels(ctx.device.kind);
}

kernels::TensorView View(const NDArray& array) { return View(array, array.shape()); }

kernels::TensorView View(const NDArray& array, absl::Span<const std::int64_t> shape) {
  kernels::TensorView v;
  // A freed array has no data; RunOp reports it.
  absl::StatusOr<void*> data = array.Data();
  v.data = data.ok() ? *data : nullptr;
  v.dtype = array.dtype();
  v.shape.assign(shape.begin(), shape.end());
  v.device = array.device();
  return v;
}

absl::Status RunOp(NDManager& scope, kernels::OpKind op, absl::Span<const kernels::TensorView> in,
                   absl::Span<const kernels::TensorView> out, const kernels::OpAttrs& attrs) {
  kernels::KernelContext ctx = CurrentContext();
  for (absl::Span<const kernels::TensorView> views : {in, out}) {
    for (const kernels::TensorView& v : views) {
      // View() leaves the data of a freed array null; a live non-empty one has some.
      if (v.data == nullptr && v.numel() > 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            kernels::OpKindName(op), ": use of freed memory (an array of a closed scope)"));
      }
      // Checked here, as MathFor does, whether or not this build has the device's kernels.
      NDS_RETURN_IF_ERROR(
          OnStepDevice(v.device, ctx, absl::StrCat(kernels::OpKindName(op), ": an array")));
    }
  }
  ScopeScratch scratch(scope);
  ctx.scratch = &scratch;
  return kernels::RunKernel(op, ctx, in, out, attrs);
}

absl::StatusOr<NDArray> RunOp(NDManager& scope, kernels::OpKind op,
                              absl::Span<const kernels::TensorView> in,
                              const kernels::OpAttrs& attrs) {
  std::vector<kernels::TensorDesc> descs;
  descs.reserve(in.size());
  for (const kernels::TensorView& v : in) descs.push_back(v.desc());
  NDS_ASSIGN_OR_RETURN(std::vector<kernels::TensorDesc> outs,
                       kernels::InferOutputs(op, descs, attrs));
  NDS_ASSIGN_OR_RETURN(NDArray out, scope.Create(outs[0].shape, outs[0].dtype));
  NDS_RETURN_IF_ERROR(RunOp(scope, op, in, {View(out)}, attrs));
  return out;
}

absl::Status Fill(const NDArray& dst, float value) {
  NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&dst}));
  NDS_ASSIGN_OR_RETURN(float* p, F32(dst));
  return math->fill(CurrentContext(), p, dst.num_elements(), value);
}

absl::Status Axpy(float alpha, const NDArray& src, const NDArray& dst, bool accumulate) {
  if (src.num_elements() != dst.num_elements()) {
    return absl::InternalError(
        absl::StrCat("gradient ", src.DebugString(), " handed to ", dst.DebugString()));
  }
  NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&src, &dst}));
  NDS_ASSIGN_OR_RETURN(const float* s, F32(src));
  NDS_ASSIGN_OR_RETURN(float* d, F32(dst));
  return math->axpy(CurrentContext(), alpha, s, d, dst.num_elements(), accumulate);
}

absl::Status AddReduced(NDManager& scope, float alpha, const NDArray& full,
                        absl::Span<const std::int64_t> in_shape, const NDArray& dst,
                        bool accumulate) {
  if (full.num_elements() == NumElements(in_shape)) return Axpy(alpha, full, dst, accumulate);
  const auto out = full.shape();
  const std::size_t lead = out.size() - std::min(out.size(), in_shape.size());
  // The common bias case: `in` is the trailing block of `out`, so the gradient is a sum
  // of rows, one table call.
  if (alpha == 1.0f && std::equal(in_shape.begin(), in_shape.end(), out.begin() + lead)) {
    NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&full, &dst}));
    NDS_ASSIGN_OR_RETURN(const float* s, F32(full));
    NDS_ASSIGN_OR_RETURN(float* d, F32(dst));
    const std::int64_t cols = NumElements(in_shape);
    return math->sum_rows(CurrentContext(), s,
                          full.num_elements() / std::max<std::int64_t>(cols, 1), cols, d,
                          accumulate);
  }
  // Otherwise ReduceSum over every axis `in` broadcasts along, keeping dims, which leaves
  // exactly in's elements in order.
  kernels::ReduceAttrs reduce;
  for (std::size_t d = 0; d < out.size(); ++d) {
    const std::int64_t in_dim = d < lead ? 1 : in_shape[d - lead];
    if (in_dim == 1 && out[d] != 1) reduce.axes.push_back(static_cast<std::int64_t>(d));
  }
  reduce.keepdims = true;
  NDS_ASSIGN_OR_RETURN(NDArray summed,
                       RunOp(scope, kernels::OpKind::kReduceSum, {View(full)}, reduce));
  return Axpy(alpha, summed, dst, accumulate);
}

}  // namespace ndserve::train
