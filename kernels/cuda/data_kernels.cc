// CUDA entry points of the data-movement family: plan on the host (data_plans.h, shared
// with the CPU kernels), then launch data.cu's kernels, LaunchTranspose's strided read, or
// queue async 2-D copies, all on the context's stream.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/data_launchers.h"
#include "kernels/data_plans.h"
#include "kernels/plans.h"

namespace ndserve::kernels::gpu {
namespace {

absl::Status RunStrided(const KernelContext& ctx, absl::string_view name, const TensorView& in,
                        const TensorView& out, const StridedPlan& p) {
  if (p.numel == 0) return absl::OkStatus();
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  NDS_ASSIGN_OR_RETURN(IndexMap map, MakeIndexMap(name, p.dims, p.strides));
  const std::size_t elem = DTypeSize(in.dtype);
  const auto* x = static_cast<const unsigned char*>(in.data) + p.offset * elem;
  return CudaStatus(
      LaunchTranspose(x, out.data, static_cast<int>(elem), map, p.numel, StreamOf(ctx)),
      absl::StrCat(name, " launch"));
}

}  // namespace

absl::Status Slice(const KernelContext& ctx, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const SliceResolved r = *ResolveSlice(in[0].shape, std::get<SliceAttrs>(attrs));
  return RunStrided(ctx, "Slice", in[0], out[0], r.plan);
}

absl::Status Expand(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs&) {
  return RunStrided(ctx, "Expand", in[0], out[0], MakeExpandPlan(in[0].shape, out[0].shape));
}

absl::Status Tile(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return RunStrided(ctx, "Tile", in[0], out[0],
                    MakeTilePlan(in[0].shape, std::get<TileAttrs>(attrs).repeats));
}

absl::Status Split(const KernelContext& ctx, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const int64_t axis =
      *NormalizeAxis(std::get<SplitAttrs>(attrs).axis, in[0].shape.size(), "Split");
  const AxisPlan pi = MakeAxisPlan(in[0].shape, axis);
  const std::size_t elem = DTypeSize(in[0].dtype);
  const std::size_t in_row = static_cast<std::size_t>(pi.axis_dim * pi.inner) * elem;
  const auto* src = static_cast<const unsigned char*>(in[0].data);
  std::size_t col = 0;
  for (const TensorView& t : out) {
    const AxisPlan po = MakeAxisPlan(t.shape, axis);
    const std::size_t row = static_cast<std::size_t>(po.axis_dim * po.inner) * elem;
    if (row > 0 && pi.outer > 0) {
      // One 2-D copy per output: `outer` rows of `row` bytes out of a pitch of `in_row`.
      NDS_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpy2DAsync(t.data, row, src + col, in_row, row, pi.outer,
                                       cudaMemcpyDeviceToDevice, StreamOf(ctx)),
                     "Split cudaMemcpy2DAsync"));
    }
    col += row;
  }
  return absl::OkStatus();
}

absl::Status Pad(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const PadAttrs& a = std::get<PadAttrs>(attrs);
  const int64_t n = out[0].numel();
  if (n == 0) return absl::OkStatus();
  const std::size_t rank = in[0].shape.size();
  if (rank > static_cast<std::size_t>(kMaxRank)) {
    return absl::UnimplementedError(
        absl::StrCat("Pad: CUDA kernel supports up to ", kMaxRank, " dims, got ", rank));
  }
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  PadMap map;
  map.rank = static_cast<int>(rank);
  map.mode = static_cast<int>(a.mode);
  const Shape in_strides = ContiguousStrides(in[0].shape);
  for (std::size_t d = 0; d < rank; ++d) {
    map.out_dims[d] = out[0].shape[d];
    map.in_dims[d] = in[0].shape[d];
    map.in_strides[d] = in_strides[d];
    map.begin[d] = a.pads[d];
  }
  return CudaStatus(LaunchPad(in[0].data, out[0].data, static_cast<int>(DTypeSize(in[0].dtype)),
                              map, ScalarBits(in[0].dtype, a.value), n, StreamOf(ctx)),
                    "Pad launch");
}

absl::Status Trilu(const KernelContext& ctx, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const TriluAttrs& a = std::get<TriluAttrs>(attrs);
  const ShapeSpan s = in[0].shape;
  const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  if (rows * cols == 0) return absl::OkStatus();
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return CudaStatus(
      LaunchTrilu(in[0].data, out[0].data, static_cast<int>(DTypeSize(in[0].dtype)),
                  in[0].numel() / (rows * cols), rows, cols, a.upper, a.k, StreamOf(ctx)),
      "Trilu launch");
}

absl::Status ConstantOfShape(const KernelContext& ctx, absl::Span<const TensorView>,
                             absl::Span<const TensorView> out, const OpAttrs& attrs) {
  if (out[0].numel() == 0) return absl::OkStatus();
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const uint64_t bits = ScalarBits(out[0].dtype, std::get<ConstantOfShapeAttrs>(attrs).value);
  return CudaStatus(LaunchFill(out[0].data, static_cast<int>(DTypeSize(out[0].dtype)), bits,
                               out[0].numel(), StreamOf(ctx)),
                    "ConstantOfShape launch");
}

absl::Status Range(const KernelContext& ctx, absl::Span<const TensorView>,
                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  if (out[0].numel() == 0) return absl::OkStatus();
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const RangeAttrs& a = std::get<RangeAttrs>(attrs);
  return CudaStatus(LaunchRange(ToScalarType(out[0].dtype), out[0].data, a.start.real, a.delta.real,
                                a.start.integer, a.delta.integer, out[0].numel(), StreamOf(ctx)),
                    "Range launch");
}

}  // namespace ndserve::kernels::gpu
