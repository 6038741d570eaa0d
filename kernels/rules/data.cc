// Rules of the data-movement family: Slice, Expand, ConstantOfShape, Range, Tile, Split,
// Pad, Trilu. Their shape-deciding inputs are host inputs (ops.def), folded into the
// attribute structs of kernels/attrs/data.h here; the index plans that both validate and
// drive the kernels are in kernels/data_plans.h.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/data_plans.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {
namespace {

std::string ListText(const std::vector<int64_t>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

// Host input `i` as a required integer list.
absl::StatusOr<std::vector<int64_t>> RequireInts(OpKind op, const HostInputs& host, int i,
                                                 absl::string_view what) {
  NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> v, host.Ints(op, i, what));
  if (!v.has_value()) return Invalid(op, absl::StrCat("the ", what, " input is missing"));
  return *std::move(v);
}

// A one-element host value (or TENSOR attribute) as a ScalarValue.
absl::StatusOr<ScalarValue> ScalarOf(OpKind op, const HostValue& v, absl::string_view what) {
  if (v.numel() != 1) {
    return Invalid(op, absl::StrFormat("'%s' must hold one element, not %s%s", what,
                                       DTypeName(v.dtype), ShapeToString(v.shape)));
  }
  ScalarValue s;
  s.is_real = v.IsReal();
  if (s.is_real) {
    s.real = v.reals[0];
  } else {
    s.integer = v.ints[0];
  }
  return s;
}

}  // namespace

absl::StatusOr<OpAttrs> BuildSlice(OpKind op, int, const AttrMap&, const HostInputs& host) {
  SliceAttrs a;
  NDS_ASSIGN_OR_RETURN(a.starts, RequireInts(op, host, 1, "starts"));
  NDS_ASSIGN_OR_RETURN(a.ends, RequireInts(op, host, 2, "ends"));
  NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, host.Ints(op, 3, "axes"));
  NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> steps, host.Ints(op, 4, "steps"));
  a.axes = axes.value_or(std::vector<int64_t>());
  a.steps = steps.value_or(std::vector<int64_t>());
  return a;
}

absl::StatusOr<Descs> InferSlice(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const SliceAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "data"));
  NDS_ASSIGN_OR_RETURN(SliceResolved r, ResolveSlice(in[0].shape, *a));
  return Descs{{in[0].dtype, r.out_shape}};
}

absl::StatusOr<OpAttrs> BuildExpand(OpKind op, int, const AttrMap&, const HostInputs& host) {
  ExpandAttrs a;
  NDS_ASSIGN_OR_RETURN(a.shape, RequireInts(op, host, 1, "shape"));
  return a;
}

absl::StatusOr<Descs> InferExpand(OpKind op, absl::Span<const TensorDesc> in,
                                  const OpAttrs& attrs) {
  const ExpandAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "input"));
  for (int64_t d : a->shape) {
    if (d < 0)
      return Invalid(op, absl::StrCat("shape ", ListText(a->shape), " has a negative dim"));
  }
  absl::StatusOr<Shape> out = BroadcastShapes(in[0].shape, Shape(a->shape.begin(), a->shape.end()));
  if (!out.ok()) {
    return Invalid(op, absl::StrFormat("cannot expand %s to shape %s", ShapeToString(in[0].shape),
                                       ListText(a->shape)));
  }
  NDS_RETURN_IF_ERROR(ValidateShape(*out, "Expand output"));
  return Descs{{in[0].dtype, *out}};
}

absl::StatusOr<OpAttrs> BuildConstantOfShape(OpKind op, int, const AttrMap& attrs,
                                             const HostInputs& host) {
  ConstantOfShapeAttrs a;
  NDS_ASSIGN_OR_RETURN(a.shape, RequireInts(op, host, 0, "input"));
  auto it = attrs.find("value");
  if (it != attrs.end()) {
    const HostValue* v = std::get_if<HostValue>(&it->second);
    if (v == nullptr) return Invalid(op, "attribute 'value' must be a one-element tensor");
    if (!DTypeIsFixedSize(v->dtype)) {
      return absl::UnimplementedError(absl::StrCat(OpKindName(op), ": a value of type ",
                                                   DTypeName(v->dtype), " is not supported"));
    }
    a.dtype = v->dtype;
    NDS_ASSIGN_OR_RETURN(a.value, ScalarOf(op, *v, "value"));
  }
  return a;
}

absl::StatusOr<Descs> InferConstantOfShape(OpKind op, absl::Span<const TensorDesc> in,
                                           const OpAttrs& attrs) {
  const ConstantOfShapeAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 0, 0));
  const Shape out(a->shape.begin(), a->shape.end());
  if (!ValidateShape(out, "output").ok()) {
    return Invalid(
        op, absl::StrCat("shape ", ListText(a->shape), " has a negative dim or too many elements"));
  }
  return Descs{{a->dtype, out}};
}

absl::StatusOr<OpAttrs> BuildRange(OpKind op, int, const AttrMap&, const HostInputs& host) {
  RangeAttrs a;
  const char* names[] = {"start", "limit", "delta"};
  ScalarValue* values[] = {&a.start, &a.limit, &a.delta};
  for (int i = 0; i < 3; ++i) {
    const HostValue* v = host.Get(i);
    if (v == nullptr) return Invalid(op, absl::StrCat("the ", names[i], " input is missing"));
    if (i == 0) {
      a.dtype = v->dtype;
      if (a.dtype != DType::kFp32 && a.dtype != DType::kFp64 && a.dtype != DType::kInt16 &&
          a.dtype != DType::kInt32 && a.dtype != DType::kInt64) {
        return absl::UnimplementedError(
            absl::StrCat("Range: inputs of type ", DTypeName(a.dtype),
                         " are not supported (FP32, FP64, INT16, INT32, INT64)"));
      }
    } else if (v->dtype != a.dtype) {
      return Invalid(op, absl::StrFormat("%s has type %s, start has %s", names[i],
                                         DTypeName(v->dtype), DTypeName(a.dtype)));
    }
    NDS_ASSIGN_OR_RETURN(*values[i], ScalarOf(op, *v, names[i]));
  }
  NDS_RETURN_IF_ERROR(RangeCount(a).status());
  return a;
}

absl::StatusOr<Descs> InferRange(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const RangeAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 0, 0));
  NDS_ASSIGN_OR_RETURN(const int64_t n, RangeCount(*a));
  return Descs{{a->dtype, Shape{n}}};
}

absl::StatusOr<OpAttrs> BuildTile(OpKind op, int, const AttrMap&, const HostInputs& host) {
  TileAttrs a;
  NDS_ASSIGN_OR_RETURN(a.repeats, RequireInts(op, host, 1, "repeats"));
  return a;
}

absl::StatusOr<Descs> InferTile(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const TileAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "input"));
  const ShapeSpan x = in[0].shape;
  if (a->repeats.size() != x.size()) {
    return Invalid(op, absl::StrFormat("repeats %s must have one entry per dim of %s",
                                       ListText(a->repeats), ShapeToString(x)));
  }
  Shape out;
  for (std::size_t d = 0; d < x.size(); ++d) {
    int64_t n;
    if (a->repeats[d] < 0 || __builtin_mul_overflow(x[d], a->repeats[d], &n)) {
      return Invalid(op, absl::StrFormat("repeats %s are invalid for %s", ListText(a->repeats),
                                         ShapeToString(x)));
    }
    out.push_back(n);
  }
  NDS_RETURN_IF_ERROR(ValidateShape(out, "Tile output"));
  return Descs{{in[0].dtype, out}};
}

absl::StatusOr<OpAttrs> BuildSplit(OpKind op, int, const AttrMap& attrs, const HostInputs& host) {
  SplitAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", 0));
  NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> split, host.Ints(op, 1, "split"));
  a.split = split.value_or(std::vector<int64_t>());
  NDS_ASSIGN_OR_RETURN(a.num_outputs, GetAttr<int64_t>(op, attrs, kNodeOutputCountAttr, 0));
  if (a.split.empty() && a.num_outputs <= 0) {
    return Invalid(op, "without a split input the node's output count is needed");
  }
  if (!a.split.empty() && a.num_outputs > 0 &&
      a.num_outputs != static_cast<int64_t>(a.split.size())) {
    return Invalid(op, absl::StrFormat("split %s has %d parts but the node has %d outputs",
                                       ListText(a.split), a.split.size(), a.num_outputs));
  }
  return a;
}

absl::StatusOr<Descs> InferSplit(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const SplitAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "input"));
  const ShapeSpan x = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(a->axis, x.size(), "Split"));
  std::vector<int64_t> sizes = a->split;
  if (sizes.empty()) {
    if (x[axis] % a->num_outputs != 0) {
      return Invalid(op, absl::StrFormat("axis %d of %s does not split evenly into %d outputs",
                                         a->axis, ShapeToString(x), a->num_outputs));
    }
    sizes.assign(a->num_outputs, x[axis] / a->num_outputs);
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return Invalid(op, absl::StrCat("split ", ListText(sizes), " has a negative size"));
    total += s;
  }
  if (total != x[axis]) {
    return Invalid(op, absl::StrFormat("split %s does not add up to axis %d of %s", ListText(sizes),
                                       a->axis, ShapeToString(x)));
  }
  Descs out;
  for (int64_t s : sizes) {
    Shape shape(x.begin(), x.end());
    shape[axis] = s;
    out.push_back({in[0].dtype, shape});
  }
  return out;
}

absl::StatusOr<OpAttrs> BuildPad(OpKind op, int, const AttrMap& attrs, const HostInputs& host) {
  PadAttrs a;
  NDS_ASSIGN_OR_RETURN(std::string mode, GetAttr<std::string>(op, attrs, "mode", "constant"));
  if (mode == "constant") {
    a.mode = PadMode::kConstant;
  } else if (mode == "reflect") {
    a.mode = PadMode::kReflect;
  } else if (mode == "edge") {
    a.mode = PadMode::kEdge;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("Pad: mode '", mode, "' is not supported (constant, reflect, edge)"));
  }
  NDS_ASSIGN_OR_RETURN(a.pads, RequireInts(op, host, 1, "pads"));
  if (const HostValue* v = host.Get(2)) {
    NDS_ASSIGN_OR_RETURN(a.value, ScalarOf(op, *v, "constant_value"));
  }
  return a;
}

absl::StatusOr<Descs> InferPad(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const PadAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "data"));
  const ShapeSpan x = in[0].shape;
  const std::size_t rank = x.size();
  if (a->pads.size() != 2 * rank) {
    return Invalid(op, absl::StrFormat("pads %s must have 2 entries per dim of %s (%d)",
                                       ListText(a->pads), ShapeToString(x), 2 * rank));
  }
  Shape out;
  for (std::size_t d = 0; d < rank; ++d) {
    const int64_t begin = a->pads[d], end = a->pads[d + rank];
    int64_t n;
    if (__builtin_add_overflow(x[d], begin, &n) || __builtin_add_overflow(n, end, &n)) {
      return Invalid(op, absl::StrFormat("pads %s overflow dim %d of %s", ListText(a->pads), d,
                                         ShapeToString(x)));
    }
    if (n < 0) {
      return Invalid(op, absl::StrFormat("pads %s crop more than dim %d of %s holds",
                                         ListText(a->pads), d, ShapeToString(x)));
    }
    if (a->mode != PadMode::kConstant && (begin > 0 || end > 0)) {
      // Reflect mirrors without repeating the edge, so it needs pads below the dim; edge
      // needs an element to repeat.
      const int64_t limit = a->mode == PadMode::kReflect ? x[d] - 1 : x[d];
      if (begin > limit || end > limit) {
        return Invalid(op, absl::StrFormat("%s padding of %d and %d is too large for dim %d of %s",
                                           a->mode == PadMode::kReflect ? "reflect" : "edge", begin,
                                           end, d, ShapeToString(x)));
      }
    }
    out.push_back(n);
  }
  NDS_RETURN_IF_ERROR(ValidateShape(out, "Pad output"));
  return Descs{{in[0].dtype, out}};
}

absl::StatusOr<OpAttrs> BuildTrilu(OpKind op, int, const AttrMap& attrs, const HostInputs& host) {
  TriluAttrs a;
  NDS_ASSIGN_OR_RETURN(a.upper, GetBoolAttr(op, attrs, "upper", true));
  if (const HostValue* v = host.Get(1)) {
    if (v->IsReal()) return Invalid(op, "input 'k' must be an integer");
    NDS_ASSIGN_OR_RETURN(ScalarValue k, ScalarOf(op, *v, "k"));
    a.k = k.integer;
  }
  return a;
}

absl::StatusOr<Descs> InferTrilu(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const TriluAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "input"));
  if (in[0].shape.size() < 2) {
    return Invalid(
        op, absl::StrCat("input ", ShapeToString(in[0].shape), " must have at least 2 dims"));
  }
  return Descs{in[0]};
}

}  // namespace ndserve::kernels::rules
