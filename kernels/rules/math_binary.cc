// Rules of the math family's broadcasting ops: Pow, Mod, the variadic Min and Max, the
// comparisons Equal/Less/Greater (BOOL out), And/Or (BOOL) and Where (three-way
// broadcasting). Broadcasting is numpy's (multidirectional).
#include <cstddef>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {
namespace {

// The broadcast of every input's shape; INVALID_ARGUMENT naming the op and the shapes.
absl::StatusOr<Shape> BroadcastAll(OpKind op, absl::Span<const TensorDesc> in) {
  Shape out(in[0].shape.begin(), in[0].shape.end());
  for (std::size_t i = 1; i < in.size(); ++i) {
    auto b = BroadcastShapes(out, in[i].shape);
    if (!b.ok()) return Invalid(op, b.status().message());
    out = *std::move(b);
  }
  return out;
}

absl::Status CheckSameDType(OpKind op, absl::Span<const TensorDesc> in, std::size_t first) {
  for (std::size_t i = first + 1; i < in.size(); ++i) {
    if (in[i].dtype != in[first].dtype) {
      return Invalid(
          op, absl::StrCat("input types differ: input ", first, " is ", DTypeName(in[first].dtype),
                           ", input ", i, " is ", DTypeName(in[i].dtype)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OpAttrs> BuildPow(OpKind op, int opset, const AttrMap& attrs,
                                 const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferPow(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "X", {DType::kFp32}));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[1], "Y", {DType::kFp32, DType::kInt32, DType::kInt64}));
  NDS_ASSIGN_OR_RETURN(Shape out, BroadcastAll(op, in));
  return Descs{{DType::kFp32, std::move(out)}};
}

absl::StatusOr<OpAttrs> BuildMod(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  ModAttrs a;
  NDS_ASSIGN_OR_RETURN(a.fmod, GetBoolAttr(op, attrs, "fmod", false));
  return a;
}

// A and B of one numeric type, broadcast; floats need fmod 1 (ONNX leaves a float
// remainder with fmod 0 undefined, and onnxruntime refuses it too).
absl::StatusOr<Descs> InferMod(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const ModAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "A", {DType::kFp32, DType::kInt32, DType::kInt64}));
  NDS_RETURN_IF_ERROR(CheckSameDType(op, in, 0));
  if (in[0].dtype == DType::kFp32 && !a->fmod) {
    return Invalid(op, "a FLOAT remainder needs fmod=1 (fmod=0 is defined for integers only)");
  }
  NDS_ASSIGN_OR_RETURN(Shape out, BroadcastAll(op, in));
  return Descs{{in[0].dtype, std::move(out)}};
}

absl::StatusOr<OpAttrs> BuildMinMax(OpKind op, int opset, const AttrMap& attrs,
                                    const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferMinMax(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, std::numeric_limits<int32_t>::max()));
  NDS_RETURN_IF_ERROR(
      CheckDType(op, in[0], "input 0", {DType::kFp32, DType::kInt32, DType::kInt64}));
  NDS_RETURN_IF_ERROR(CheckSameDType(op, in, 0));
  NDS_ASSIGN_OR_RETURN(Shape out, BroadcastAll(op, in));
  return Descs{{in[0].dtype, std::move(out)}};
}

absl::StatusOr<OpAttrs> BuildCompare(OpKind op, int opset, const AttrMap& attrs,
                                     const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferCompare(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  if (op == OpKind::kEqual) {
    NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input 0",
                                   {DType::kFp32, DType::kInt32, DType::kInt64, DType::kBool}));
  } else {
    NDS_RETURN_IF_ERROR(
        CheckDType(op, in[0], "input 0", {DType::kFp32, DType::kInt32, DType::kInt64}));
  }
  NDS_RETURN_IF_ERROR(CheckSameDType(op, in, 0));
  NDS_ASSIGN_OR_RETURN(Shape out, BroadcastAll(op, in));
  return Descs{{DType::kBool, std::move(out)}};
}

absl::StatusOr<OpAttrs> BuildLogic(OpKind op, int opset, const AttrMap& attrs,
                                   const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferLogic(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input 0", {DType::kBool}));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[1], "input 1", {DType::kBool}));
  NDS_ASSIGN_OR_RETURN(Shape out, BroadcastAll(op, in));
  return Descs{{DType::kBool, std::move(out)}};
}

absl::StatusOr<OpAttrs> BuildWhere(OpKind op, int opset, const AttrMap& attrs,
                                   const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferWhere(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 3, 3));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "condition", {DType::kBool}));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[1], "X"));
  NDS_RETURN_IF_ERROR(CheckSameDType(op, in, 1));
  NDS_ASSIGN_OR_RETURN(Shape out, BroadcastAll(op, in));
  return Descs{{in[1].dtype, std::move(out)}};
}

}  // namespace ndserve::kernels::rules
