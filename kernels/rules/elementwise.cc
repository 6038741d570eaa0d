// Rules of the elementwise ops: Add, Sub, Mul, Div (numpy broadcasting) and the unary
// float activations.
#include "absl/strings/str_cat.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {

absl::StatusOr<OpAttrs> BuildBinary(OpKind op, int opset, const AttrMap& attrs,
                                    const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferBinary(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  NDS_RETURN_IF_ERROR(
      CheckDType(op, in[0], "input 0", {DType::kFp32, DType::kInt32, DType::kInt64}));
  if (in[1].dtype != in[0].dtype) {
    return Invalid(op, absl::StrCat("operand types differ: ", DTypeName(in[0].dtype), " and ",
                                    DTypeName(in[1].dtype)));
  }
  auto out = BroadcastShapes(in[0].shape, in[1].shape);
  if (!out.ok()) return Invalid(op, out.status().message());
  return Descs{{in[0].dtype, *std::move(out)}};
}

absl::StatusOr<OpAttrs> BuildUnary(OpKind op, int opset, const AttrMap& attrs,
                                   const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferUnary(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", {DType::kFp32}));
  return Descs{in[0]};
}

}  // namespace ndserve::kernels::rules
