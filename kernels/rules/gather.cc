// Rules of Gather.
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {

absl::StatusOr<OpAttrs> BuildGather(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  GatherAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", 0));
  return a;
}

absl::StatusOr<Descs> InferGather(OpKind op, absl::Span<const TensorDesc> in,
                                  const OpAttrs& attrs) {
  const GatherAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "data"));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[1], "indices", {DType::kInt32, DType::kInt64}));
  const ShapeSpan data = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(a->axis, data.size(), "Gather"));
  Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  NDS_RETURN_IF_ERROR(ValidateShape(out, "Gather output"));
  return Descs{{in[0].dtype, out}};
}

}  // namespace ndserve::kernels::rules
