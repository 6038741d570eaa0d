// Rules of the math family's unary ops: Neg, Abs and Sign (FP32, INT32, INT64), the
// activations with attributes (LeakyRelu, Elu, Selu, Celu, HardSigmoid, HardSwish), Clip
// (bounds from host inputs), PRelu (slope broadcast to X), IsNaN / IsInf (BOOL out) and
// Not (BOOL). The FP32-only unary math (Sqrt, Exp, Log, Reciprocal, Floor, Ceil, the
// trigonometric functions, Round, Softplus) shares the Unary rules of rules/elementwise.cc.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {

absl::StatusOr<OpAttrs> BuildSignedUnary(OpKind op, int opset, const AttrMap& attrs,
                                         const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferSignedUnary(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", {DType::kFp32, DType::kInt32, DType::kInt64}));
  return Descs{in[0]};
}

absl::StatusOr<OpAttrs> BuildActivation(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  ActivationAttrs a;
  if (op == OpKind::kHardSwish) {  // fixed HardSigmoid parameters
    a.alpha = 1.0f / 6.0f;
    a.beta = 0.5f;
  } else if (op == OpKind::kHardSigmoid) {
    NDS_ASSIGN_OR_RETURN(a.alpha, GetAttr<float>(op, attrs, "alpha", 0.2f));
    NDS_ASSIGN_OR_RETURN(a.beta, GetAttr<float>(op, attrs, "beta", 0.5f));
  } else if (op == OpKind::kSelu) {  // ONNX's defaults, PyTorch's SELU constants
    NDS_ASSIGN_OR_RETURN(a.alpha, GetAttr<float>(op, attrs, "alpha", 1.67326319217681884765625f));
    NDS_ASSIGN_OR_RETURN(a.beta, GetAttr<float>(op, attrs, "gamma", 1.05070102214813232421875f));
  } else {  // LeakyRelu, Elu, Celu
    NDS_ASSIGN_OR_RETURN(
        a.alpha, GetAttr<float>(op, attrs, "alpha", op == OpKind::kLeakyRelu ? 0.01f : 1.0f));
    if (op == OpKind::kCelu && a.alpha == 0.0f) return Invalid(op, "alpha must not be 0");
  }
  return a;
}

// IsNaN and IsInf: FP32 in, BOOL out.
absl::StatusOr<OpAttrs> BuildFloatClass(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  FloatClassAttrs a;
  if (op == OpKind::kIsInf) {
    NDS_ASSIGN_OR_RETURN(a.negative, GetBoolAttr(op, attrs, "detect_negative", true));
    NDS_ASSIGN_OR_RETURN(a.positive, GetBoolAttr(op, attrs, "detect_positive", true));
  }
  return a;
}

absl::StatusOr<Descs> InferFloatClass(OpKind op, absl::Span<const TensorDesc> in,
                                      const OpAttrs& attrs) {
  const FloatClassAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "X", {DType::kFp32}));
  return Descs{{DType::kBool, in[0].shape}};
}

absl::StatusOr<Descs> InferActivation(OpKind op, absl::Span<const TensorDesc> in,
                                      const OpAttrs& attrs) {
  const ActivationAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", {DType::kFp32}));
  return Descs{in[0]};
}

absl::StatusOr<OpAttrs> BuildClip(OpKind op, int, const AttrMap&, const HostInputs& host) {
  ClipAttrs a;
  NDS_ASSIGN_OR_RETURN(std::optional<double> lo, host.Scalar(op, 1, "min"));
  NDS_ASSIGN_OR_RETURN(std::optional<double> hi, host.Scalar(op, 2, "max"));
  if (lo.has_value()) a.min = static_cast<float>(*lo);
  if (hi.has_value()) a.max = static_cast<float>(*hi);
  if (std::isnan(a.min) || std::isnan(a.max)) return Invalid(op, "a bound is NaN");
  return a;
}

absl::StatusOr<Descs> InferClip(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const ClipAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", {DType::kFp32}));
  return Descs{in[0]};
}

absl::StatusOr<OpAttrs> BuildPRelu(OpKind op, int opset, const AttrMap& attrs,
                                   const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferPRelu(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "X", {DType::kFp32}));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[1], "slope", {DType::kFp32}));
  if (!IsUnidirectionallyBroadcastable(in[1].shape, in[0].shape)) {
    return Invalid(op, absl::StrCat("slope ", ShapeToString(in[1].shape),
                                    " does not broadcast to X ", ShapeToString(in[0].shape)));
  }
  return Descs{in[0]};
}

absl::StatusOr<OpAttrs> BuildNot(OpKind op, int opset, const AttrMap& attrs,
                                 const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferNot(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", {DType::kBool}));
  return Descs{in[0]};
}

}  // namespace ndserve::kernels::rules
