// Rules of the reductions. ReduceSum takes its axes as a host input from opset 13;
// ReduceMean (like ReduceMax/Min/Prod) keeps them as an attribute until opset 18.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"
#include "kernels/shape_inference.h"

namespace ndserve::kernels::rules {

absl::StatusOr<OpAttrs> BuildReduceSum(OpKind op, int, const AttrMap& attrs,
                                       const HostInputs& host) {
  ReduceAttrs a;
  NDS_ASSIGN_OR_RETURN(a.keepdims, GetBoolAttr(op, attrs, "keepdims", true));
  NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, host.Ints(op, 1, "axes"));
  a.axes = axes.value_or(std::vector<int64_t>());
  NDS_ASSIGN_OR_RETURN(a.noop_with_empty_axes,
                       GetBoolAttr(op, attrs, "noop_with_empty_axes", false));
  return a;
}

absl::StatusOr<OpAttrs> BuildReduceAttr(OpKind op, int, const AttrMap& attrs,
                                        const HostInputs&) {
  ReduceAttrs a;
  NDS_ASSIGN_OR_RETURN(a.keepdims, GetBoolAttr(op, attrs, "keepdims", true));
  NDS_ASSIGN_OR_RETURN(a.axes, GetAttr<std::vector<int64_t>>(op, attrs, "axes", {}));
  return a;
}

absl::StatusOr<Descs> InferReduceSum(OpKind op, absl::Span<const TensorDesc> in,
                                     const OpAttrs& attrs) {
  const ReduceAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  // ReduceSum also adds INT32 and INT64 (mask.sum(1) of a padding mask, a count).
  if (op == OpKind::kReduceSum) {
    NDS_RETURN_IF_ERROR(
        CheckDType(op, in[0], "input", {DType::kFp32, DType::kInt32, DType::kInt64}));
  } else {
    NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", {DType::kFp32}));
  }
  const ShapeSpan x = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const std::vector<int64_t> axes,
                       ResolveReduceAxes(*a, x.size(), OpKindName(op)));
  if (axes.empty()) return Descs{in[0]};
  Shape out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool red = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (!red) {
      out.push_back(x[i]);
    } else if (a->keepdims) {
      out.push_back(1);
    }
  }
  return Descs{{in[0].dtype, out}};
}

absl::StatusOr<Descs> InferReduceAttr(OpKind op, absl::Span<const TensorDesc> in,
                                      const OpAttrs& attrs) {
  return InferReduceSum(op, in, attrs);
}

// ReduceProd also takes INT32 and INT64: detection exports count a tensor's elements as
// the product of its Shape (torchvision's `boxes.numel() == 0`).
absl::StatusOr<OpAttrs> BuildReduceProd(OpKind op, int opset, const AttrMap& attrs,
                                        const HostInputs& host) {
  return BuildReduceAttr(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferReduceProd(OpKind op, absl::Span<const TensorDesc> in,
                                      const OpAttrs& attrs) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(
      CheckDType(op, in[0], "input", {DType::kFp32, DType::kInt32, DType::kInt64}));
  const TensorDesc as_float{DType::kFp32, in[0].shape};
  NDS_ASSIGN_OR_RETURN(Descs out, InferReduceSum(op, absl::MakeConstSpan(&as_float, 1), attrs));
  out[0].dtype = in[0].dtype;
  return out;
}

}  // namespace ndserve::kernels::rules

namespace ndserve::kernels {

absl::StatusOr<std::vector<int64_t>> ResolveReduceAxes(const ReduceAttrs& attrs, int64_t rank,
                                                       absl::string_view op_name) {
  std::vector<int64_t> axes;
  if (attrs.axes.empty()) {
    if (attrs.noop_with_empty_axes) return axes;
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    return axes;
  }
  for (int64_t axis : attrs.axes) {
    NDS_ASSIGN_OR_RETURN(const int64_t n, NormalizeAxis(axis, rank, op_name));
    if (std::find(axes.begin(), axes.end(), n) != axes.end()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: axis %d given twice", op_name, axis));
    }
    axes.push_back(n);
  }
  return axes;
}

}  // namespace ndserve::kernels
