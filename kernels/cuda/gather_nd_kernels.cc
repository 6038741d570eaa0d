// CUDA GatherND: the walk is planned on the host (kernels/gather_nd_plan.h, as the CPU
// plans it) and one launch gathers; a bad index comes back through the context's error
// flag as INVALID_ARGUMENT, checked as Gather and GatherElements check theirs
// (kernels/cuda/kernels.cc).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/error_flag.h"
#include "kernels/cuda/gather_nd_launchers.h"
#include "kernels/gather_nd_plan.h"

namespace ndserve::kernels::gpu {
namespace {

absl::StatusOr<GatherNDArgs> ArgsFor(const GatherNDPlan& p) {
  if (p.k > kMaxRank) {
    return absl::UnimplementedError(absl::StrCat(
        "GatherND: the CUDA kernel takes index tuples of up to ", kMaxRank, " coordinates, got ",
        p.k));
  }
  GatherNDArgs a;
  a.tuples = p.tuples;
  a.per_batch = p.per_batch > 0 ? p.per_batch : 1;  // no tuples then: nothing divides by it
  a.batch_stride = p.batch_stride;
  a.slice = p.slice;
  a.k = static_cast<int>(p.k);
  for (int64_t i = 0; i < p.k; ++i) {
    a.dims[i] = p.dims[i];
    a.strides[i] = p.strides[i];
  }
  return a;
}

}  // namespace

absl::Status GatherND(const KernelContext& ctx, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(RequireErrorFlag(ctx, "GatherND"));
  const int64_t batch_dims = std::get<GatherNDAttrs>(attrs).batch_dims;
  const GatherNDPlan p = MakeGatherNDPlan(in[0].shape, in[1].shape, batch_dims);
  NDS_ASSIGN_OR_RETURN(const GatherNDArgs args, ArgsFor(p));
  if (p.tuples == 0) return absl::OkStatus();
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  ClearErrorFlag(ctx);
  NDS_RETURN_IF_ERROR(CudaStatus(
      LaunchGatherND(in[0].data, static_cast<int>(DTypeSize(in[0].dtype)),
                     in[1].as<const int64_t>(), out[0].data, args, ctx.error_flag, StreamOf(ctx)),
      "GatherND launch"));
  return CheckErrorFlag(ctx, "GatherND",
                        absl::StrFormat("an index is out of range for data %s (indices %s, "
                                        "batch_dims %d)",
                                        ShapeToString(in[0].shape), ShapeToString(in[1].shape),
                                        batch_dims));
}

}  // namespace ndserve::kernels::gpu
