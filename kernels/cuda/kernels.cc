// CUDA entry points for everything but GEMM: plan on the host (plans.h, shared with the
// CPU), then launch the .cu kernels or queue async copies on the context's stream.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/math_launchers.h"
#include "kernels/cuda/error_flag.h"
#include "kernels/plans.h"
#include "kernels/shape_inference.h"
#include "base/status_macros.h"

namespace ndserve::kernels::gpu {
namespace {

absl::Status Binary(const KernelContext& ctx, BinaryCode code, absl::string_view name,
                    absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const BroadcastPlan p = MakeBroadcastPlan(out[0].shape, in[0].shape, in[1].shape);
  NDS_ASSIGN_OR_RETURN(IndexMap map, MakeIndexMap(name, p.dims, p.a_strides, p.b_strides));
  return CudaStatus(LaunchBinary(code, ToScalarType(in[0].dtype), in[0].data, in[1].data,
                                 out[0].data, map, p.numel, StreamOf(ctx)),
                    absl::StrCat(name, " launch"));
}

absl::Status Unary(const KernelContext& ctx, UnaryCode code, absl::string_view name,
                   absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return CudaStatus(
      LaunchUnary(code, in[0].as<const float>(), out[0].as<float>(), in[0].numel(), StreamOf(ctx)),
      absl::StrCat(name, " launch"));
}

absl::Status Reduce(const KernelContext& ctx, OpKind op, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const std::vector<int64_t> axes =
      *ResolveReduceAxes(std::get<ReduceAttrs>(attrs), in[0].shape.size(), OpKindName(op));
  if (axes.empty()) {  // noop_with_empty_axes
    return CopyInput(ctx, in, out, attrs);
  }
  const ReducePlan p = MakeReducePlan(in[0].shape, axes);
  const ReduceSplit s = SplitReducePlan(p);
  NDS_ASSIGN_OR_RETURN(IndexMap kept, MakeIndexMap(OpKindName(op), s.kept_dims, s.kept_strides));
  NDS_ASSIGN_OR_RETURN(IndexMap reduced,
                       MakeIndexMap(OpKindName(op), s.reduced_dims, s.reduced_strides));
  // The mean of nothing is 0, as on the CPU (kernels/cpu/reduce.cc).
  const float scale = op != OpKind::kReduceMean ? 1.0f
                      : p.reduce_numel == 0   ? 0.0f
                                              : 1.0f / static_cast<float>(p.reduce_numel);
  // An empty input reduces to zeros (or NaN means): reduce_numel is then 0.
  const int64_t reduce_n = in[0].numel() == 0 ? 0 : p.reduce_numel;
  if (in[0].dtype != DType::kFp32) {  // ReduceSum of INT32 or INT64
    return CudaStatus(
        LaunchIntegerReduce(false, in[0].dtype == DType::kInt64, in[0].data, out[0].data, kept,
                            reduced, p.out_numel, reduce_n, StreamOf(ctx)),
        absl::StrCat(OpKindName(op), " launch"));
  }
  return CudaStatus(LaunchReduce(in[0].as<const float>(), out[0].as<float>(), kept, reduced,
                                 p.out_numel, reduce_n, scale, StreamOf(ctx)),
                    absl::StrCat(OpKindName(op), " launch"));
}

// y = x moved as the plan says, any element size (Transpose, DepthToSpace, SpaceToDepth).
absl::Status GatherTransposed(const KernelContext& ctx, absl::string_view op, const TensorView& x,
                              const TensorView& y, const TransposePlan& p) {
  NDS_ASSIGN_OR_RETURN(IndexMap map, MakeIndexMap(op, p.out_dims, p.in_strides));
  return CudaStatus(LaunchTranspose(x.data, y.data, static_cast<int>(DTypeSize(x.dtype)), map,
                                    p.numel, StreamOf(ctx)),
                    absl::StrCat(op, " launch"));
}

}  // namespace

absl::Status Add(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Binary(ctx, BinaryCode::kAdd, "Add", in, out);
}
absl::Status Sub(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Binary(ctx, BinaryCode::kSub, "Sub", in, out);
}
absl::Status Mul(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Binary(ctx, BinaryCode::kMul, "Mul", in, out);
}
absl::Status Div(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Binary(ctx, BinaryCode::kDiv, "Div", in, out);
}
absl::Status Relu(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, UnaryCode::kRelu, "Relu", in, out);
}
absl::Status Sigmoid(const KernelContext& ctx, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, UnaryCode::kSigmoid, "Sigmoid", in, out);
}
absl::Status Tanh(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, UnaryCode::kTanh, "Tanh", in, out);
}
absl::Status Erf(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, UnaryCode::kErf, "Erf", in, out);
}

absl::Status Softmax(const KernelContext& ctx, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const int64_t axis =
      *NormalizeAxis(std::get<SoftmaxAttrs>(attrs).axis, in[0].shape.size(), "Softmax");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  return CudaStatus(LaunchSoftmax(in[0].as<const float>(), out[0].as<float>(), p.outer, p.axis_dim,
                                  p.inner, StreamOf(ctx)),
                    "Softmax launch");
}

absl::Status LayerNormalization(const KernelContext& ctx, absl::Span<const TensorView> in,
                                absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const LayerNormAttrs& a = std::get<LayerNormAttrs>(attrs);
  const int64_t axis = *NormalizeAxis(a.axis, in[0].shape.size(), "LayerNormalization");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  return CudaStatus(
      LaunchLayerNorm(in[0].as<const float>(), in[1].as<const float>(),
                      in.size() > 2 ? in[2].as<const float>() : nullptr, out[0].as<float>(),
                      out.size() > 1 ? out[1].as<float>() : nullptr,
                      out.size() > 2 ? out[2].as<float>() : nullptr, p.outer, p.axis_dim * p.inner,
                      a.epsilon, StreamOf(ctx)),
      "LayerNormalization launch");
}

namespace {

// GatherElements' and ScatterElements' walk of the indices (kernels/plans.h).
absl::StatusOr<ElementsArgs> ElementsArgsFor(absl::string_view op, const ElementsAttrs& a,
                                             const TensorView& data, const TensorView& indices) {
  const int64_t axis = *NormalizeAxis(a.axis, data.shape.size(), op);
  const ElementsPlan p = MakeElementsPlan(data.shape, indices.shape, axis);
  Shape strides(p.data_strides.begin(), p.data_strides.end());
  strides[axis] = 0;
  ElementsArgs args;
  NDS_ASSIGN_OR_RETURN(args.base, MakeIndexMap(op, p.index_dims, strides));
  args.count = p.count;
  args.axis_dim = p.axis_dim;
  args.axis_stride = p.data_strides[axis];
  args.lines = p.lines;
  args.line_len = p.index_dims[axis];
  args.inner = p.inner;
  args.int64_indices = indices.dtype == DType::kInt64;
  return args;
}

std::string OutOfRange(const ElementsArgs& a, int64_t axis, const TensorView& data) {
  return absl::StrFormat("an index is out of range for axis %d of size %d (data %s)", axis,
                         a.axis_dim, ShapeToString(data.shape));
}

}  // namespace

absl::Status Gather(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(RequireErrorFlag(ctx, "Gather"));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const GatherAttrs& a = std::get<GatherAttrs>(attrs);
  // A fused embedding bag reads rows of a [rows, dim] table: axis 0.
  const int64_t axis = a.bag_mean ? 0 : *NormalizeAxis(a.axis, in[0].shape.size(), "Gather");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  ClearErrorFlag(ctx);
  const bool int64_ids = in[1].dtype == DType::kInt64;
  cudaError_t launched;
  if (a.bag_mean) {
    const Shape& ids = in[1].shape;
    const int64_t bag = ids.back();
    const int64_t stride = a.bag_select >= 0 ? ids[1] * bag : bag;
    const char* first = static_cast<const char*>(in[1].data) +
                        (a.bag_select >= 0 ? a.bag_select * bag * DTypeSize(in[1].dtype) : 0);
    launched = LaunchBagMean(in[0].as<const float>(), first, int64_ids, out[0].as<float>(),
                             p.axis_dim, p.inner, ids[0], bag, stride, ctx.error_flag,
                             StreamOf(ctx));
  } else {
    launched = LaunchGather(in[0].data, static_cast<int>(DTypeSize(in[0].dtype)), in[1].data,
                            int64_ids, out[0].data, p.outer, p.axis_dim, p.inner, in[1].numel(),
                            ctx.error_flag, StreamOf(ctx));
  }
  NDS_RETURN_IF_ERROR(CudaStatus(launched, "Gather launch"));
  return CheckErrorFlag(ctx, "Gather",
                        absl::StrFormat("an index is out of range for axis %d of size %d (data %s)",
                                        axis, p.axis_dim, ShapeToString(in[0].shape)));
}

absl::Status ScatterND(const KernelContext& ctx, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(RequireErrorFlag(ctx, "ScatterND"));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const ScatterNDPlan p = MakeScatterNDPlan(in[0].shape, in[1].shape);
  if (p.k > kMaxRank) {
    return absl::UnimplementedError(absl::StrCat("ScatterND: CUDA kernel supports index tuples of "
                                                 "up to ", kMaxRank, " coordinates, got ", p.k));
  }
  ScatterNDArgs args;
  args.tuples = p.tuples;
  args.slice = p.slice;
  args.k = static_cast<int>(p.k);
  for (int64_t i = 0; i < p.k; ++i) {
    args.dims[i] = p.dims[i];
    args.slice_strides[i] = p.slice_strides[i];
  }
  if (out[0].data != in[0].data && in[0].nbytes() > 0) {
    NDS_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(out[0].data, in[0].data, in[0].nbytes(),
                                                   cudaMemcpyDeviceToDevice, StreamOf(ctx)),
                                   "ScatterND cudaMemcpyAsync"));
  }
  ClearErrorFlag(ctx);
  NDS_RETURN_IF_ERROR(CudaStatus(
      LaunchScatterND(static_cast<int>(std::get<ScatterNDAttrs>(attrs).reduction),
                      ToScalarType(in[0].dtype), static_cast<int>(DTypeSize(in[0].dtype)),
                      in[1].as<const int64_t>(), in[2].data, out[0].data, args, ctx.error_flag,
                      StreamOf(ctx)),
      "ScatterND launch"));
  return CheckErrorFlag(ctx, "ScatterND",
                        absl::StrCat("an index is out of range for data ",
                                     ShapeToString(in[0].shape)));
}

absl::Status OneHot(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const OneHotAttrs& a = std::get<OneHotAttrs>(attrs);
  const ShapeSpan idx = in[0].shape;
  const int64_t axis = *NormalizeAxis(a.axis, idx.size() + 1, "OneHot");
  OneHotArgs args;
  args.outer = NumElements(idx.subspan(0, axis));
  args.inner = NumElements(idx.subspan(axis));
  args.depth = a.depth;
  args.off = a.off;
  args.on = a.on;
  return CudaStatus(LaunchOneHot(ToScalarType(out[0].dtype), in[0].data,
                                 in[0].dtype == DType::kInt64, out[0].data, args, StreamOf(ctx)),
                    "OneHot launch");
}

absl::Status GatherElements(const KernelContext& ctx, absl::Span<const TensorView> in,
                            absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(RequireErrorFlag(ctx, "GatherElements"));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const ElementsAttrs& a = std::get<ElementsAttrs>(attrs);
  NDS_ASSIGN_OR_RETURN(const ElementsArgs args,
                       ElementsArgsFor("GatherElements", a, in[0], in[1]));
  ClearErrorFlag(ctx);
  NDS_RETURN_IF_ERROR(CudaStatus(
      LaunchGatherElements(in[0].data, static_cast<int>(DTypeSize(in[0].dtype)), in[1].data,
                           out[0].data, args, ctx.error_flag, StreamOf(ctx)),
      "GatherElements launch"));
  return CheckErrorFlag(
      ctx, "GatherElements",
      OutOfRange(args, *NormalizeAxis(a.axis, in[0].shape.size(), "GatherElements"), in[0]));
}

absl::Status ScatterElements(const KernelContext& ctx, absl::Span<const TensorView> in,
                             absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(RequireErrorFlag(ctx, "ScatterElements"));
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const ElementsAttrs& a = std::get<ElementsAttrs>(attrs);
  NDS_ASSIGN_OR_RETURN(const ElementsArgs args,
                       ElementsArgsFor("ScatterElements", a, in[0], in[1]));
  if (out[0].data != in[0].data && in[0].nbytes() > 0) {
    NDS_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(out[0].data, in[0].data, in[0].nbytes(),
                                                   cudaMemcpyDeviceToDevice, StreamOf(ctx)),
                                   "ScatterElements cudaMemcpyAsync"));
  }
  ClearErrorFlag(ctx);
  NDS_RETURN_IF_ERROR(CudaStatus(
      LaunchScatterElements(static_cast<int>(a.reduction), ToScalarType(in[0].dtype),
                            static_cast<int>(DTypeSize(in[0].dtype)), in[1].data, in[2].data,
                            out[0].data, args, ctx.error_flag, StreamOf(ctx)),
      "ScatterElements launch"));
  return CheckErrorFlag(
      ctx, "ScatterElements",
      OutOfRange(args, *NormalizeAxis(a.axis, in[0].shape.size(), "ScatterElements"), in[0]));
}

absl::Status ReduceSum(const KernelContext& ctx, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Reduce(ctx, OpKind::kReduceSum, in, out, attrs);
}
absl::Status ReduceMean(const KernelContext& ctx, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Reduce(ctx, OpKind::kReduceMean, in, out, attrs);
}

absl::Status Concat(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const int64_t axis =
      *NormalizeAxis(std::get<ConcatAttrs>(attrs).axis, out[0].shape.size(), "Concat");
  const AxisPlan po = MakeAxisPlan(out[0].shape, axis);
  const std::size_t elem = DTypeSize(out[0].dtype);
  const std::size_t out_row = static_cast<std::size_t>(po.axis_dim * po.inner) * elem;
  auto* dst = static_cast<unsigned char*>(out[0].data);
  std::size_t col = 0;
  for (const TensorView& t : in) {
    const AxisPlan pi = MakeAxisPlan(t.shape, axis);
    const std::size_t row = static_cast<std::size_t>(pi.axis_dim * pi.inner) * elem;
    if (row > 0 && po.outer > 0) {
      // One 2-D copy per input: `outer` rows of `row` bytes into a pitch of `out_row`.
      NDS_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpy2DAsync(dst + col, out_row, t.data, row, row, po.outer,
                                       cudaMemcpyDeviceToDevice, StreamOf(ctx)),
                     "Concat cudaMemcpy2DAsync"));
    }
    col += row;
  }
  return absl::OkStatus();
}

absl::Status Transpose(const KernelContext& ctx, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const auto perm = ResolvePerm(std::get<TransposeAttrs>(attrs), in[0].shape.size());
  return GatherTransposed(ctx, "Transpose", in[0], out[0], MakeTransposePlan(in[0].shape, perm));
}

absl::Status DepthSpace(const KernelContext& ctx, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const DepthSpaceView v = MakeDepthSpaceView(std::get<DepthSpaceAttrs>(attrs), in[0].shape);
  return GatherTransposed(ctx, "DepthToSpace/SpaceToDepth", in[0], out[0],
                          MakeTransposePlan(v.dims, v.perm));
}

absl::Status CopyInput(const KernelContext& ctx, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs&) {
  if (out[0].data == in[0].data || in[0].nbytes() == 0) return absl::OkStatus();
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return CudaStatus(cudaMemcpyAsync(out[0].data, in[0].data, in[0].nbytes(),
                                    cudaMemcpyDeviceToDevice, StreamOf(ctx)),
                    "cudaMemcpyAsync");
}

absl::Status Cast(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return CudaStatus(LaunchCast(ToScalarType(in[0].dtype), ToScalarType(out[0].dtype), in[0].data,
                               out[0].data, in[0].numel(), StreamOf(ctx)),
                    "Cast launch");
}

}  // namespace ndserve::kernels::gpu
