// Rules of Shape and Size: INT64 values computed from the input's shape alone, which is
// what lets the engine evaluate them, and the shape arithmetic after them, on the host.
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {

absl::StatusOr<OpAttrs> BuildShape(OpKind op, int opset, const AttrMap& attrs, const HostInputs&) {
  ShapeAttrs a;
  // start and end exist from opset 15; earlier opsets take the whole shape.
  if (opset >= 15) {
    NDS_ASSIGN_OR_RETURN(a.start, GetAttr<int64_t>(op, attrs, "start", 0));
    NDS_ASSIGN_OR_RETURN(a.end, GetAttr<int64_t>(op, attrs, "end", a.end));
  }
  return a;
}

absl::StatusOr<OpAttrs> BuildSize(OpKind op, int opset, const AttrMap& attrs,
                                  const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferShape(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const ShapeAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  return Descs{{DType::kInt64, Shape{a->Last(rank) - a->First(rank)}}};
}

absl::StatusOr<Descs> InferSize(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  return Descs{{DType::kInt64, Shape{}}};
}

}  // namespace ndserve::kernels::rules
