// CUDA entry points of the math family (ops.def section "Elementwise math, comparison and
// logic; reductions; TopK, ArgMax"): plan on the host with plans.h, shared with the CPU
// kernels, then queue the math_*.cu launchers on the context's stream and report the
// launch status. No device memory is allocated and nothing synchronizes.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/math_launchers.h"
#include "kernels/plans.h"
#include "kernels/shape_inference.h"

namespace ndserve::kernels::gpu {
namespace {

absl::Status Unary(const KernelContext& ctx, MathUnaryCode code, OpKind op,
                   absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                   float alpha = 0.0f, float beta = 0.0f) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return CudaStatus(LaunchMathUnary(code, ToScalarType(in[0].dtype), in[0].data, out[0].data,
                                    in[0].numel(), alpha, beta, StreamOf(ctx)),
                    absl::StrCat(OpKindName(op), " launch"));
}

// out = a op b, both broadcast to out's shape.
absl::Status Binary(const KernelContext& ctx, MathBinaryCode code, OpKind op, const TensorView& a,
                    const TensorView& b, const TensorView& out) {
  const BroadcastPlan p = MakeBroadcastPlan(out.shape, a.shape, b.shape);
  NDS_ASSIGN_OR_RETURN(IndexMap map,
                       MakeIndexMap(OpKindName(op), p.dims, p.a_strides, p.b_strides));
  return CudaStatus(LaunchMathBinary(code, ToScalarType(a.dtype), ToScalarType(b.dtype), a.data,
                                     b.data, out.data, map, p.numel, StreamOf(ctx)),
                    absl::StrCat(OpKindName(op), " launch"));
}

// Min / Max over 1..N inputs: the first pair into the output, then each further input
// folded into the output in place; the launches run in order on the one stream.
absl::Status Variadic(const KernelContext& ctx, MathBinaryCode code, OpKind op,
                      absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const TensorView& y = out[0];
  if (in.size() == 1) {
    if (y.data == in[0].data || y.nbytes() == 0) return absl::OkStatus();
    return CudaStatus(
        cudaMemcpyAsync(y.data, in[0].data, y.nbytes(), cudaMemcpyDeviceToDevice, StreamOf(ctx)),
        absl::StrCat(OpKindName(op), " cudaMemcpyAsync"));
  }
  NDS_RETURN_IF_ERROR(Binary(ctx, code, op, in[0], in[1], y));
  for (std::size_t k = 2; k < in.size(); ++k) {
    NDS_RETURN_IF_ERROR(Binary(ctx, code, op, y, in[k], y));
  }
  return absl::OkStatus();
}

absl::Status ReduceMinMax(const KernelContext& ctx, OpKind op, absl::Span<const TensorView> in,
                          absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const std::vector<int64_t> axes =
      *ResolveReduceAxes(std::get<ReduceAttrs>(attrs), in[0].shape.size(), OpKindName(op));
  if (axes.empty()) {  // noop_with_empty_axes
    if (out[0].data == in[0].data || in[0].nbytes() == 0) return absl::OkStatus();
    return CudaStatus(cudaMemcpyAsync(out[0].data, in[0].data, in[0].nbytes(),
                                      cudaMemcpyDeviceToDevice, StreamOf(ctx)),
                      absl::StrCat(OpKindName(op), " cudaMemcpyAsync"));
  }
  const ReducePlan p = MakeReducePlan(in[0].shape, axes);
  const ReduceSplit s = SplitReducePlan(p);
  NDS_ASSIGN_OR_RETURN(IndexMap kept, MakeIndexMap(OpKindName(op), s.kept_dims, s.kept_strides));
  NDS_ASSIGN_OR_RETURN(IndexMap reduced,
                       MakeIndexMap(OpKindName(op), s.reduced_dims, s.reduced_strides));
  // An empty input reduces to the identity: reduce_numel is then 0.
  const int64_t reduce_n = in[0].numel() == 0 ? 0 : p.reduce_numel;
  return CudaStatus(
      LaunchReduceMinMax(op == OpKind::kReduceMax, ToScalarType(in[0].dtype), in[0].data,
                         out[0].data, kept, reduced, p.out_numel, reduce_n, StreamOf(ctx)),
      absl::StrCat(OpKindName(op), " launch"));
}

absl::Status Fold(const KernelContext& ctx, OpKind op, FoldReduce kind,
                  absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                  const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const std::vector<int64_t> axes =
      *ResolveReduceAxes(std::get<ReduceAttrs>(attrs), in[0].shape.size(), OpKindName(op));
  const ReducePlan p = MakeReducePlan(in[0].shape, axes);
  const ReduceSplit s = SplitReducePlan(p);
  NDS_ASSIGN_OR_RETURN(IndexMap kept, MakeIndexMap(OpKindName(op), s.kept_dims, s.kept_strides));
  NDS_ASSIGN_OR_RETURN(IndexMap reduced,
                       MakeIndexMap(OpKindName(op), s.reduced_dims, s.reduced_strides));
  const int64_t reduce_n = in[0].numel() == 0 ? 0 : p.reduce_numel;
  if (in[0].dtype != DType::kFp32) {  // ReduceProd of INT32 or INT64
    return CudaStatus(
        LaunchIntegerReduce(true, in[0].dtype == DType::kInt64, in[0].data, out[0].data, kept,
                            reduced, p.out_numel, reduce_n, StreamOf(ctx)),
        absl::StrCat(OpKindName(op), " launch"));
  }
  return CudaStatus(LaunchFoldReduce(kind, in[0].as<const float>(), out[0].as<float>(), kept,
                                     reduced, p.out_numel, reduce_n, StreamOf(ctx)),
                    absl::StrCat(OpKindName(op), " launch"));
}

}  // namespace

absl::Status ReduceL2(const KernelContext& ctx, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Fold(ctx, OpKind::kReduceL2, FoldReduce::kL2, in, out, attrs);
}
absl::Status ReduceSumSquare(const KernelContext& ctx, absl::Span<const TensorView> in,
                             absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Fold(ctx, OpKind::kReduceSumSquare, FoldReduce::kSumSquare, in, out, attrs);
}
absl::Status ReduceLogSumExp(const KernelContext& ctx, absl::Span<const TensorView> in,
                             absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Fold(ctx, OpKind::kReduceLogSumExp, FoldReduce::kLogSumExp, in, out, attrs);
}
absl::Status ReduceProd(const KernelContext& ctx, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Fold(ctx, OpKind::kReduceProd, FoldReduce::kProd, in, out, attrs);
}
absl::Status ReduceL1(const KernelContext& ctx, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Fold(ctx, OpKind::kReduceL1, FoldReduce::kL1, in, out, attrs);
}

absl::Status Sqrt(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kSqrt, OpKind::kSqrt, in, out);
}
absl::Status Exp(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kExp, OpKind::kExp, in, out);
}
absl::Status Log(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kLog, OpKind::kLog, in, out);
}
absl::Status Reciprocal(const KernelContext& ctx, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kReciprocal, OpKind::kReciprocal, in, out);
}
absl::Status Floor(const KernelContext& ctx, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kFloor, OpKind::kFloor, in, out);
}
absl::Status Ceil(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kCeil, OpKind::kCeil, in, out);
}
absl::Status Tan(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kTan, OpKind::kTan, in, out);
}
absl::Status Asin(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kAsin, OpKind::kAsin, in, out);
}
absl::Status Acos(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kAcos, OpKind::kAcos, in, out);
}
absl::Status Atan(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kAtan, OpKind::kAtan, in, out);
}
absl::Status Selu(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ActivationAttrs& a = std::get<ActivationAttrs>(attrs);
  return Unary(ctx, MathUnaryCode::kSelu, OpKind::kSelu, in, out, a.alpha, a.beta);
}
absl::Status Celu(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Unary(ctx, MathUnaryCode::kCelu, OpKind::kCelu, in, out,
               std::get<ActivationAttrs>(attrs).alpha);
}
absl::Status IsNaN(const KernelContext& ctx, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kIsNaN, OpKind::kIsNaN, in, out);
}
absl::Status IsInf(const KernelContext& ctx, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const FloatClassAttrs& a = std::get<FloatClassAttrs>(attrs);
  return Unary(ctx, MathUnaryCode::kIsInf, OpKind::kIsInf, in, out, a.negative ? 1.0f : 0.0f,
               a.positive ? 1.0f : 0.0f);
}
absl::Status Sin(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kSin, OpKind::kSin, in, out);
}
absl::Status Cos(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kCos, OpKind::kCos, in, out);
}
absl::Status Round(const KernelContext& ctx, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kRound, OpKind::kRound, in, out);
}
absl::Status Softplus(const KernelContext& ctx, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kSoftplus, OpKind::kSoftplus, in, out);
}
absl::Status Sign(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kSign, OpKind::kSign, in, out);
}
absl::Status Neg(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kNeg, OpKind::kNeg, in, out);
}
absl::Status Abs(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kAbs, OpKind::kAbs, in, out);
}
absl::Status LeakyRelu(const KernelContext& ctx, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Unary(ctx, MathUnaryCode::kLeakyRelu, OpKind::kLeakyRelu, in, out,
               std::get<ActivationAttrs>(attrs).alpha);
}
absl::Status Elu(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Unary(ctx, MathUnaryCode::kElu, OpKind::kElu, in, out,
               std::get<ActivationAttrs>(attrs).alpha);
}
absl::Status HardSigmoid(const KernelContext& ctx, absl::Span<const TensorView> in,
                         absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ActivationAttrs& a = std::get<ActivationAttrs>(attrs);
  return Unary(ctx, MathUnaryCode::kHardSigmoid, OpKind::kHardSigmoid, in, out, a.alpha, a.beta);
}
absl::Status HardSwish(const KernelContext& ctx, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kHardSwish, OpKind::kHardSwish, in, out);
}
absl::Status Clip(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ClipAttrs& a = std::get<ClipAttrs>(attrs);
  return Unary(ctx, MathUnaryCode::kClip, OpKind::kClip, in, out, a.min, a.max);
}
absl::Status PRelu(const KernelContext& ctx, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return Binary(ctx, MathBinaryCode::kPRelu, OpKind::kPRelu, in[0], in[1], out[0]);
}

absl::Status Pow(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return Binary(ctx, MathBinaryCode::kPow, OpKind::kPow, in[0], in[1], out[0]);
}

absl::Status Mod(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const MathBinaryCode code =
      std::get<ModAttrs>(attrs).fmod ? MathBinaryCode::kFmod : MathBinaryCode::kMod;
  return Binary(ctx, code, OpKind::kMod, in[0], in[1], out[0]);
}

absl::Status Min(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Variadic(ctx, MathBinaryCode::kMin, OpKind::kMin, in, out);
}
absl::Status Max(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Variadic(ctx, MathBinaryCode::kMax, OpKind::kMax, in, out);
}

absl::Status Equal(const KernelContext& ctx, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return Binary(ctx, MathBinaryCode::kEqual, OpKind::kEqual, in[0], in[1], out[0]);
}
absl::Status Less(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return Binary(ctx, MathBinaryCode::kLess, OpKind::kLess, in[0], in[1], out[0]);
}
absl::Status Greater(const KernelContext& ctx, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return Binary(ctx, MathBinaryCode::kGreater, OpKind::kGreater, in[0], in[1], out[0]);
}
absl::Status LessOrEqual(const KernelContext& ctx, absl::Span<const TensorView> in,
                         absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return Binary(ctx, MathBinaryCode::kLessOrEqual, OpKind::kLessOrEqual, in[0], in[1], out[0]);
}
absl::Status GreaterOrEqual(const KernelContext& ctx, absl::Span<const TensorView> in,
                            absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return Binary(ctx, MathBinaryCode::kGreaterOrEqual, OpKind::kGreaterOrEqual, in[0], in[1],
                out[0]);
}
absl::Status Xor(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return Binary(ctx, MathBinaryCode::kXor, OpKind::kXor, in[0], in[1], out[0]);
}
absl::Status And(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return Binary(ctx, MathBinaryCode::kAnd, OpKind::kAnd, in[0], in[1], out[0]);
}
absl::Status Or(const KernelContext& ctx, absl::Span<const TensorView> in,
                absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return Binary(ctx, MathBinaryCode::kOr, OpKind::kOr, in[0], in[1], out[0]);
}
absl::Status Not(const KernelContext& ctx, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary(ctx, MathUnaryCode::kNot, OpKind::kNot, in, out);
}

absl::Status Where(const KernelContext& ctx, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const BroadcastPlan p = MakeBroadcastPlan(out[0].shape, in[0].shape, in[1].shape, in[2].shape);
  NDS_ASSIGN_OR_RETURN(IndexMap cond_x, MakeIndexMap("Where", p.dims, p.a_strides, p.b_strides));
  NDS_ASSIGN_OR_RETURN(IndexMap y_map, MakeIndexMap("Where", p.dims, p.c_strides));
  return CudaStatus(
      LaunchWhere(in[0].as<const uint8_t>(), in[1].data, in[2].data, out[0].data,
                  static_cast<int>(DTypeSize(in[1].dtype)), cond_x, y_map, p.numel, StreamOf(ctx)),
      "Where launch");
}

absl::Status ReduceMax(const KernelContext& ctx, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return ReduceMinMax(ctx, OpKind::kReduceMax, in, out, attrs);
}
absl::Status ReduceMin(const KernelContext& ctx, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return ReduceMinMax(ctx, OpKind::kReduceMin, in, out, attrs);
}

absl::Status LogSoftmax(const KernelContext& ctx, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const int64_t axis =
      *NormalizeAxis(std::get<SoftmaxAttrs>(attrs).axis, in[0].shape.size(), "LogSoftmax");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  return CudaStatus(LaunchLogSoftmax(in[0].as<const float>(), out[0].as<float>(), p.outer,
                                     p.axis_dim, p.inner, StreamOf(ctx)),
                    "LogSoftmax launch");
}

absl::Status ArgMax(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const ArgMaxAttrs& a = std::get<ArgMaxAttrs>(attrs);
  const int64_t axis = *NormalizeAxis(a.axis, in[0].shape.size(), "ArgMax");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  return CudaStatus(LaunchArgMax(ToScalarType(in[0].dtype), in[0].data, out[0].as<int64_t>(),
                                 p.outer, p.axis_dim, p.inner, a.select_last_index, a.largest,
                                 StreamOf(ctx)),
                    a.largest ? "ArgMax launch" : "ArgMin launch");
}

absl::Status ArgMin(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return ArgMax(ctx, in, out, attrs);  // the rule set largest = false
}

absl::Status TopK(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const TopKAttrs& a = std::get<TopKAttrs>(attrs);
  const int64_t axis = *NormalizeAxis(a.axis, in[0].shape.size(), "TopK");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  return CudaStatus(
      LaunchTopK(ToScalarType(in[0].dtype), in[0].data, out[0].data, out[1].as<int64_t>(), p.outer,
                 p.axis_dim, p.inner, a.k, a.largest, StreamOf(ctx)),
      "TopK launch");
}

absl::Status CumSum(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  const CumSumAttrs& a = std::get<CumSumAttrs>(attrs);
  const int64_t axis = *NormalizeAxis(a.axis, in[0].shape.size(), "CumSum");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  return CudaStatus(LaunchCumSum(ToScalarType(in[0].dtype), in[0].data, out[0].data, p.outer,
                                 p.axis_dim, p.inner, a.exclusive, a.reverse, StreamOf(ctx)),
                    "CumSum launch");
}

}  // namespace ndserve::kernels::gpu
