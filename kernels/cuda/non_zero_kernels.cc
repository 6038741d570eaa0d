// CUDA NonZero: the count is known only once the device has counted, so this kernel waits
// for the context's stream once, between counting (non_zero_launchers.h) and allocating
// its output through KernelContext::outputs; the coordinates are then written by queued
// work like any other kernel's output.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/non_zero_launchers.h"

namespace ndserve::kernels::gpu {

absl::Status NonZero(const KernelContext& ctx, absl::Span<const TensorView> in,
                     absl::Span<const TensorView>, const OpAttrs&) {
  const TensorView& x = in[0];
  // A 0-d input reads as one element of a 1-D tensor (InferNonZero's [1, count]).
  const Shape dims = x.shape.empty() ? Shape{1} : x.shape;
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (rank > kMaxRank) {
    return absl::UnimplementedError(absl::StrCat("NonZero: the CUDA kernel takes inputs of up to ",
                                                 kMaxRank, " dims, got ", rank));
  }
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError("NonZero: the CUDA kernel needs scratch memory");
  }
  NonZeroArgs args;
  args.n = x.numel();
  args.rank = static_cast<int>(rank);
  for (int64_t d = 0; d < rank; ++d) args.dims[d] = dims[d];
  int64_t count = 0;
  const int64_t* offsets = nullptr;
  if (args.n > 0) {
    NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
    const int64_t tiles = NonZeroTiles(args.n);
    NDS_ASSIGN_OR_RETURN(void* scratch, ctx.scratch->Allocate((tiles + 1) * sizeof(int64_t)));
    int64_t* tile_offsets = static_cast<int64_t*>(scratch);
    NDS_RETURN_IF_ERROR(CudaStatus(
        LaunchNonZeroOffsets(ToScalarType(x.dtype), x.data, args.n, tile_offsets, StreamOf(ctx)),
        "NonZero count launch"));
    NDS_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(&count, tile_offsets + tiles, sizeof(count),
                                                   cudaMemcpyDeviceToHost, StreamOf(ctx)),
                                   "NonZero count cudaMemcpyAsync"));
    NDS_RETURN_IF_ERROR(
        CudaStatus(cudaStreamSynchronize(StreamOf(ctx)), "NonZero cudaStreamSynchronize"));
    offsets = tile_offsets;
  }
  NDS_ASSIGN_OR_RETURN(TensorView y, ctx.outputs->Allocate(0, Shape{rank, count}));
  if (count == 0) return absl::OkStatus();
  return CudaStatus(LaunchNonZeroWrite(ToScalarType(x.dtype), x.data, args, offsets, count,
                                       y.as<int64_t>(), StreamOf(ctx)),
                    "NonZero write launch");
}

}  // namespace ndserve::kernels::gpu
