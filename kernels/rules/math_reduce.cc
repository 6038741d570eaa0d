// Rules of the math family's reductions and axis ops: ReduceMax/ReduceMin (axes attribute
// at opsets 13-17, like ReduceMean), ArgMax, TopK (K from host input 1) and CumSum (axis
// from host input 1). LogSoftmax shares Softmax's rules (rules/normalization.cc).
#include <algorithm>
#include <initializer_list>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"
#include "kernels/shape_inference.h"

namespace ndserve::kernels::rules {
namespace {

constexpr std::initializer_list<DType> kNumeric = {DType::kFp32, DType::kInt32, DType::kInt64};

}  // namespace

absl::StatusOr<OpAttrs> BuildReduceMinMax(OpKind op, int opset, const AttrMap& attrs,
                                          const HostInputs& host) {
  return BuildReduceAttr(op, opset, attrs, host);
}

absl::StatusOr<Descs> InferReduceMinMax(OpKind op, absl::Span<const TensorDesc> in,
                                        const OpAttrs& attrs) {
  const ReduceAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", kNumeric));
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
  return Descs{{in[0].dtype, std::move(out)}};
}

absl::StatusOr<OpAttrs> BuildArgMax(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  ArgMaxAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", 0));
  NDS_ASSIGN_OR_RETURN(a.keepdims, GetBoolAttr(op, attrs, "keepdims", true));
  NDS_ASSIGN_OR_RETURN(a.select_last_index, GetBoolAttr(op, attrs, "select_last_index", false));
  a.largest = op != OpKind::kArgMin;
  return a;
}

absl::StatusOr<Descs> InferArgMax(OpKind op, absl::Span<const TensorDesc> in,
                                  const OpAttrs& attrs) {
  const ArgMaxAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", kNumeric));
  const ShapeSpan x = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(a->axis, x.size(), OpKindName(op)));
  if (x[axis] == 0) {
    return Invalid(op, absl::StrFormat("axis %d of input %s is empty; there is no maximum", a->axis,
                                       ShapeToString(x)));
  }
  Shape out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (static_cast<int64_t>(i) != axis) {
      out.push_back(x[i]);
    } else if (a->keepdims) {
      out.push_back(1);
    }
  }
  return Descs{{DType::kInt64, std::move(out)}};
}

absl::StatusOr<OpAttrs> BuildTopK(OpKind op, int, const AttrMap& attrs, const HostInputs& host) {
  TopKAttrs a;
  NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> k, host.Ints(op, 1, "K"));
  if (!k.has_value()) return Invalid(op, "input 'K' is missing");
  if (k->size() != 1) {
    return Invalid(op, absl::StrCat("input 'K' must hold one element, not ", k->size()));
  }
  a.k = (*k)[0];
  if (a.k < 0) return Invalid(op, absl::StrCat("K is ", a.k, "; it must be >= 0"));
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", -1));
  NDS_ASSIGN_OR_RETURN(a.largest, GetBoolAttr(op, attrs, "largest", true));
  NDS_ASSIGN_OR_RETURN(a.sorted, GetBoolAttr(op, attrs, "sorted", true));
  return a;
}

absl::StatusOr<Descs> InferTopK(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const TopKAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "X", kNumeric));
  const ShapeSpan x = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(a->axis, x.size(), OpKindName(op)));
  if (a->k > x[axis]) {
    return Invalid(
        op, absl::StrFormat("K %d exceeds axis %d of X %s", a->k, a->axis, ShapeToString(x)));
  }
  Shape out(x.begin(), x.end());
  out[axis] = a->k;
  return Descs{{in[0].dtype, out}, {DType::kInt64, out}};
}

absl::StatusOr<OpAttrs> BuildCumSum(OpKind op, int, const AttrMap& attrs, const HostInputs& host) {
  CumSumAttrs a;
  NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axis, host.Ints(op, 1, "axis"));
  if (!axis.has_value()) return Invalid(op, "input 'axis' is missing");
  if (axis->size() != 1) {
    return Invalid(op, absl::StrCat("input 'axis' must hold one element, not ", axis->size()));
  }
  a.axis = (*axis)[0];
  NDS_ASSIGN_OR_RETURN(a.exclusive, GetBoolAttr(op, attrs, "exclusive", false));
  NDS_ASSIGN_OR_RETURN(a.reverse, GetBoolAttr(op, attrs, "reverse", false));
  return a;
}

absl::StatusOr<Descs> InferCumSum(OpKind op, absl::Span<const TensorDesc> in,
                                  const OpAttrs& attrs) {
  const CumSumAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "x", kNumeric));
  NDS_RETURN_IF_ERROR(NormalizeAxis(a->axis, in[0].shape.size(), OpKindName(op)).status());
  return Descs{in[0]};
}

}  // namespace ndserve::kernels::rules
