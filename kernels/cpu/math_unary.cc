// The math family's unary ops on the CPU: FP32 math (Sqrt, Exp, Log, Reciprocal, Floor,
// Ceil, the trigonometric functions, Round, Softplus), Neg, Abs and Sign (FP32, INT32,
// INT64), the activations with attributes (LeakyRelu, Elu, Selu, Celu, HardSigmoid,
// HardSwish, Clip), PRelu (slope broadcast to X), IsNaN / IsInf and Not (BOOL). One
// contiguous loop per tensor over the shared functors of kernels/math_ops.h.
#include <cstdint>

#include "kernels/cpu/broadcast_loop.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/math_ops.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

template <typename T, typename Op>
absl::Status Map(absl::Span<const TensorView> in, absl::Span<const TensorView> out, Op op) {
  const T* x = in[0].as<const T>();
  T* y = out[0].as<T>();
  const int64_t n = in[0].numel();
  for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
  return absl::OkStatus();
}

template <typename Op>
absl::Status MapFloat(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                      Op op = Op()) {
  return Map<float>(in, out, op);
}

// FP32, INT32 or INT64, as InferOutputs admits for Neg and Abs.
template <typename Op>
absl::Status MapSigned(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  switch (in[0].dtype) {
    case DType::kFp32:
      return Map<float>(in, out, Op());
    case DType::kInt32:
      return Map<int32_t>(in, out, Op());
    case DType::kInt64:
      return Map<int64_t>(in, out, Op());
    default:
      return absl::InternalError("unary op: unexpected dtype");
  }
}

}  // namespace

absl::Status Tan(const KernelContext&, absl::Span<const TensorView> in,
               absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<TanOp>(in, out);
}
absl::Status Asin(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<AsinOp>(in, out);
}
absl::Status Acos(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<AcosOp>(in, out);
}
absl::Status Atan(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<AtanOp>(in, out);
}
absl::Status Selu(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ActivationAttrs& a = std::get<ActivationAttrs>(attrs);
  return MapFloat(in, out, SeluOp{a.alpha, a.beta});
}
absl::Status Celu(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return MapFloat(in, out, CeluOp{std::get<ActivationAttrs>(attrs).alpha});
}
absl::Status IsNaN(const KernelContext&, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  const float* x = in[0].as<const float>();
  uint8_t* y = out[0].as<uint8_t>();
  for (int64_t i = 0; i < in[0].numel(); ++i) y[i] = IsNaNOp()(x[i]);
  return absl::OkStatus();
}
absl::Status IsInf(const KernelContext&, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const FloatClassAttrs& a = std::get<FloatClassAttrs>(attrs);
  const IsInfOp op{a.negative, a.positive};
  const float* x = in[0].as<const float>();
  uint8_t* y = out[0].as<uint8_t>();
  for (int64_t i = 0; i < in[0].numel(); ++i) y[i] = op(x[i]);
  return absl::OkStatus();
}
absl::Status Sin(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<SinOp>(in, out);
}
absl::Status Cos(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<CosOp>(in, out);
}
absl::Status Round(const KernelContext&, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<RoundOp>(in, out);
}
absl::Status Softplus(const KernelContext&, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<SoftplusOp>(in, out);
}
absl::Status Sign(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return MapSigned<SignOp>(in, out);
}
absl::Status Sqrt(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<SqrtOp>(in, out);
}
absl::Status Exp(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<ExpOp>(in, out);
}
absl::Status Log(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<LogOp>(in, out);
}
absl::Status Reciprocal(const KernelContext&, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<ReciprocalOp>(in, out);
}
absl::Status Floor(const KernelContext&, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<FloorOp>(in, out);
}
absl::Status Ceil(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return MapFloat<CeilOp>(in, out);
}
absl::Status Neg(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return MapSigned<NegOp>(in, out);
}
absl::Status Abs(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return MapSigned<AbsOp>(in, out);
}

absl::Status LeakyRelu(const KernelContext&, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return MapFloat(in, out, LeakyReluOp{std::get<ActivationAttrs>(attrs).alpha});
}
absl::Status Elu(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return MapFloat(in, out, EluOp{std::get<ActivationAttrs>(attrs).alpha});
}
absl::Status HardSigmoid(const KernelContext&, absl::Span<const TensorView> in,
                         absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ActivationAttrs& a = std::get<ActivationAttrs>(attrs);
  HardSigmoidArray(in[0].as<const float>(), out[0].as<float>(), in[0].numel(), a.alpha, a.beta);
  return absl::OkStatus();
}
absl::Status HardSwish(const KernelContext&, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs&) {
  HardSwishArray(in[0].as<const float>(), out[0].as<float>(), in[0].numel());
  return absl::OkStatus();
}
absl::Status Clip(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ClipAttrs& a = std::get<ClipAttrs>(attrs);
  return MapFloat(in, out, ClipOp{a.min, a.max});
}

absl::Status PRelu(const KernelContext&, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  const BroadcastPlan p = MakeBroadcastPlan(out[0].shape, in[0].shape, in[1].shape);
  BroadcastBinary(in[0].as<const float>(), in[1].as<const float>(), out[0].as<float>(), p,
                  PReluOp());
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
