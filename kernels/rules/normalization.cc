// Rules of Softmax and LayerNormalization.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {

absl::StatusOr<OpAttrs> BuildSoftmax(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  SoftmaxAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", -1));
  return a;
}

absl::StatusOr<Descs> InferSoftmax(OpKind op, absl::Span<const TensorDesc> in,
                                   const OpAttrs& attrs) {
  const SoftmaxAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", {DType::kFp32}));
  NDS_RETURN_IF_ERROR(NormalizeAxis(a->axis, in[0].shape.size(), OpKindName(op)).status());
  return Descs{in[0]};
}

absl::StatusOr<OpAttrs> BuildLayerNorm(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  LayerNormAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", -1));
  NDS_ASSIGN_OR_RETURN(a.epsilon, GetAttr<float>(op, attrs, "epsilon", 1e-5f));
  NDS_ASSIGN_OR_RETURN(int64_t stash, GetAttr<int64_t>(op, attrs, "stash_type", 1));
  if (stash != 1) {
    return absl::UnimplementedError(absl::StrFormat(
        "LayerNormalization: stash_type %d is not supported (only 1, FP32)", stash));
  }
  return a;
}

absl::StatusOr<Descs> InferLayerNorm(OpKind op, absl::Span<const TensorDesc> in,
                                     const OpAttrs& attrs) {
  const LayerNormAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 3));
  for (std::size_t i = 0; i < in.size(); ++i) {
    NDS_RETURN_IF_ERROR(CheckDType(op, in[i], i, {DType::kFp32}));
  }
  const ShapeSpan x = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(a->axis, x.size(), "LayerNormalization"));
  const ShapeSpan normalized = x.subspan(axis);
  for (std::size_t i = 1; i < in.size(); ++i) {
    // Scale and B cover the normalized dims exactly; leading 1s are tolerated.
    ShapeSpan s = in[i].shape;
    while (s.size() > normalized.size() && s.front() == 1) s.remove_prefix(1);
    const bool ok =
        std::equal(s.begin(), s.end(), normalized.end() - std::min(s.size(), normalized.size()),
                   normalized.end()) &&
        NumElements(s) == NumElements(normalized);
    if (!ok) {
      return Invalid(
          op, absl::StrCat(i == 1 ? "Scale" : "B", " has shape ", ShapeToString(in[i].shape),
                           ", expected ", ShapeToString(normalized), " (X ", ShapeToString(x),
                           ", axis ", axis, ")"));
    }
  }
  Shape stats(x.begin(), x.end());
  for (std::size_t i = axis; i < stats.size(); ++i) stats[i] = 1;
  return Descs{in[0], {DType::kFp32, stats}, {DType::kFp32, stats}};
}

}  // namespace ndserve::kernels::rules
