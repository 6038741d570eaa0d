#include "kernels/shape_inference.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/plans.h"
#include "base/status_macros.h"

namespace ndserve::kernels {
namespace {

using Descs = std::vector<TensorDesc>;

absl::Status Invalid(OpKind op, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(OpKindName(op), ": ", message));
}

absl::Status CheckInputCount(OpKind op, absl::Span<const TensorDesc> in, std::size_t min,
                             std::size_t max) {
  if (in.size() < min || in.size() > max) {
    return Invalid(
        op, min == max ? absl::StrFormat("expects %d inputs, got %d", min, in.size())
                       : absl::StrFormat("expects %d to %d inputs, got %d", min, max, in.size()));
  }
  return absl::OkStatus();
}

absl::Status CheckDType(OpKind op, const TensorDesc& t, absl::string_view what,
                        std::initializer_list<DType> allowed) {
  if (std::find(allowed.begin(), allowed.end(), t.dtype) != allowed.end()) {
    return absl::OkStatus();
  }
  std::string names;
  for (DType d : allowed) absl::StrAppend(&names, names.empty() ? "" : ", ", DTypeName(d));
  return absl::UnimplementedError(absl::StrFormat("%s: %s has type %s; supported: %s",
                                                  OpKindName(op), what, DTypeName(t.dtype), names));
}

absl::Status CheckFixedSize(OpKind op, const TensorDesc& t, absl::string_view what) {
  if (DTypeIsFixedSize(t.dtype)) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrFormat("%s: %s has type %s, which has no fixed size",
                                                  OpKindName(op), what, DTypeName(t.dtype)));
}

Shape Dims(std::initializer_list<int64_t> d) { return Shape(d); }

// --- per-op rules ---------------------------------------------------------------------

absl::StatusOr<Descs> Gemm(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kGemm;
  const GemmAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 3));
  for (std::size_t i = 0; i < in.size(); ++i) {
    NDS_RETURN_IF_ERROR(CheckDType(op, in[i], absl::StrCat("input ", i), {DType::kFp32}));
  }
  if (in[0].shape.size() != 2 || in[1].shape.size() != 2) {
    return Invalid(op, absl::StrCat("A and B must be matrices, got A ", ShapeToString(in[0].shape),
                                    " and B ", ShapeToString(in[1].shape)));
  }
  const GemmPlan p = MakeGemmPlan(in[0].shape, in[1].shape, *a);
  const int64_t k_b = a->trans_b ? in[1].shape[1] : in[1].shape[0];
  if (p.k != k_b) {
    return Invalid(
        op, absl::StrFormat("inner dimensions differ: A %s%s and B %s%s (K %d vs %d)",
                            ShapeToString(in[0].shape), a->trans_a ? " (transA)" : "",
                            ShapeToString(in[1].shape), a->trans_b ? " (transB)" : "", p.k, k_b));
  }
  const Shape out = Dims({p.m, p.n});
  if (in.size() == 3 && !IsUnidirectionallyBroadcastable(in[2].shape, out)) {
    return Invalid(op, absl::StrCat("C of shape ", ShapeToString(in[2].shape),
                                    " does not broadcast to the output ", ShapeToString(out)));
  }
  return Descs{{DType::kFp32, out}};
}

absl::StatusOr<Descs> MatMul(absl::Span<const TensorDesc> in) {
  constexpr OpKind op = OpKind::kMatMul;
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  for (std::size_t i = 0; i < 2; ++i) {
    NDS_RETURN_IF_ERROR(CheckDType(op, in[i], absl::StrCat("input ", i), {DType::kFp32}));
  }
  const ShapeSpan a = in[0].shape, b = in[1].shape;
  if (a.empty() || b.empty()) {
    return Invalid(op, absl::StrCat("operands must have rank >= 1, got ", ShapeToString(a), " and ",
                                    ShapeToString(b)));
  }
  const int64_t k_b = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (a.back() != k_b) {
    return Invalid(op, absl::StrFormat("inner dimensions differ: %s and %s (K %d vs %d)",
                                       ShapeToString(a), ShapeToString(b), a.back(), k_b));
  }
  const ShapeSpan a_batch = a.size() <= 2 ? ShapeSpan() : a.subspan(0, a.size() - 2);
  const ShapeSpan b_batch = b.size() <= 2 ? ShapeSpan() : b.subspan(0, b.size() - 2);
  auto batch = BroadcastShapes(a_batch, b_batch);
  if (!batch.ok()) {
    return Invalid(op, absl::StrCat("batch dims of ", ShapeToString(a), " and ", ShapeToString(b),
                                    ": ", batch.status().message()));
  }
  Shape out = *batch;
  if (a.size() > 1) out.push_back(a[a.size() - 2]);
  if (b.size() > 1) out.push_back(b.back());
  return Descs{{DType::kFp32, out}};
}

absl::StatusOr<Descs> Binary(OpKind op, absl::Span<const TensorDesc> in) {
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

absl::StatusOr<Descs> Unary(OpKind op, absl::Span<const TensorDesc> in) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", {DType::kFp32}));
  return Descs{in[0]};
}

absl::StatusOr<Descs> Softmax(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kSoftmax;
  const SoftmaxAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", {DType::kFp32}));
  NDS_RETURN_IF_ERROR(NormalizeAxis(a->axis, in[0].shape.size(), "Softmax").status());
  return Descs{in[0]};
}

absl::StatusOr<Descs> LayerNorm(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kLayerNormalization;
  const LayerNormAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 3));
  for (std::size_t i = 0; i < in.size(); ++i) {
    NDS_RETURN_IF_ERROR(CheckDType(op, in[i], absl::StrCat("input ", i), {DType::kFp32}));
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

absl::StatusOr<Descs> Gather(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kGather;
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

absl::StatusOr<Descs> Reduce(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  const ReduceAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input", {DType::kFp32}));
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
  return Descs{{DType::kFp32, out}};
}

absl::StatusOr<Descs> Concat(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kConcat;
  const ConcatAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  if (in.empty()) return Invalid(op, "expects at least one input");
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "input 0"));
  const ShapeSpan first = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(a->axis, first.size(), "Concat"));
  Shape out(first.begin(), first.end());
  out[axis] = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const ShapeSpan s = in[i].shape;
    if (in[i].dtype != in[0].dtype) {
      return Invalid(op, absl::StrFormat("input %d has type %s, input 0 has %s", i,
                                         DTypeName(in[i].dtype), DTypeName(in[0].dtype)));
    }
    bool ok = s.size() == first.size();
    for (std::size_t d = 0; ok && d < s.size(); ++d) {
      ok = static_cast<int64_t>(d) == axis || s[d] == first[d];
    }
    if (!ok) {
      return Invalid(op, absl::StrFormat("input %d has shape %s, incompatible with input 0's %s "
                                         "along axis %d",
                                         i, ShapeToString(s), ShapeToString(first), axis));
    }
    out[axis] += s[axis];
  }
  return Descs{{in[0].dtype, out}};
}

absl::StatusOr<Descs> Reshape(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kReshape;
  const ReshapeAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "data"));
  const ShapeSpan x = in[0].shape;
  Shape out;
  int infer = -1;
  int64_t known = 1;
  const std::string spec = absl::StrCat("[", absl::StrJoin(a->shape, ","), "]");
  for (std::size_t i = 0; i < a->shape.size(); ++i) {
    int64_t d = a->shape[i];
    if (d == 0 && !a->allowzero) {
      if (i >= x.size()) {
        return Invalid(op, absl::StrFormat("shape %s copies dim %d of %s, which has no such dim",
                                           spec, i, ShapeToString(x)));
      }
      d = x[i];
    }
    if (d == -1) {
      if (infer >= 0) return Invalid(op, absl::StrCat("shape ", spec, " has more than one -1"));
      infer = static_cast<int>(i);
    } else if (d < 0) {
      return Invalid(op, absl::StrCat("shape ", spec, " has a negative dim"));
    } else if (__builtin_mul_overflow(known, d, &known)) {
      return Invalid(op, absl::StrCat("shape ", spec, " has too many elements"));
    }
    out.push_back(d);
  }
  const int64_t n = NumElements(x);
  if (infer >= 0) {
    if (known == 0 || n % known != 0) {
      return Invalid(
          op, absl::StrFormat("cannot reshape %s (%d elements) to %s", ShapeToString(x), n, spec));
    }
    out[infer] = n / known;
  } else if (known != n) {
    return Invalid(op, absl::StrFormat("cannot reshape %s (%d elements) to %s (%d elements)",
                                       ShapeToString(x), n, spec, known));
  }
  return Descs{{in[0].dtype, out}};
}

absl::StatusOr<Descs> Flatten(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kFlatten;
  const FlattenAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "input"));
  const ShapeSpan x = in[0].shape;
  // Flatten's axis may equal the rank (everything goes into the outer dim).
  const int64_t rank = x.size();
  if (a->axis < -rank || a->axis > rank) {
    return Invalid(op, absl::StrFormat("axis %d is out of range for rank %d", a->axis, rank));
  }
  const int64_t axis = a->axis < 0 ? a->axis + rank : a->axis;
  return Descs{
      {in[0].dtype, Dims({NumElements(x.subspan(0, axis)), NumElements(x.subspan(axis))})}};
}

absl::StatusOr<Descs> Transpose(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kTranspose;
  const TransposeAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "data"));
  const ShapeSpan x = in[0].shape;
  const auto perm = ResolvePerm(*a, x.size());
  std::vector<bool> seen(x.size(), false);
  bool ok = perm.size() == x.size();
  for (std::size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < static_cast<int64_t>(x.size()) && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok) {
    return Invalid(op, absl::StrCat("perm [", absl::StrJoin(a->perm, ","),
                                    "] is not a permutation of the dims of ", ShapeToString(x)));
  }
  Shape out;
  for (int64_t p : perm) out.push_back(x[p]);
  return Descs{{in[0].dtype, out}};
}

absl::StatusOr<Descs> Squeeze(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kSqueeze;
  const SqueezeAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "data"));
  const ShapeSpan x = in[0].shape;
  std::vector<bool> drop(x.size(), a->axes.empty());
  if (a->axes.empty()) {
    for (std::size_t i = 0; i < x.size(); ++i) drop[i] = x[i] == 1;
  }
  for (int64_t axis : a->axes) {
    NDS_ASSIGN_OR_RETURN(const int64_t n, NormalizeAxis(axis, x.size(), "Squeeze"));
    if (x[n] != 1) {
      return Invalid(op, absl::StrFormat("cannot squeeze axis %d of %s: its size is %d, not 1",
                                         axis, ShapeToString(x), x[n]));
    }
    if (drop[n]) return Invalid(op, absl::StrFormat("axis %d given twice", axis));
    drop[n] = true;
  }
  Shape out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!drop[i]) out.push_back(x[i]);
  }
  return Descs{{in[0].dtype, out}};
}

absl::StatusOr<Descs> Unsqueeze(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kUnsqueeze;
  const UnsqueezeAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "data"));
  const ShapeSpan x = in[0].shape;
  if (a->axes.empty()) return Invalid(op, "axes must not be empty");
  const int64_t rank = x.size() + a->axes.size();
  std::vector<bool> inserted(rank, false);
  for (int64_t axis : a->axes) {
    NDS_ASSIGN_OR_RETURN(const int64_t n, NormalizeAxis(axis, rank, "Unsqueeze"));
    if (inserted[n]) return Invalid(op, absl::StrFormat("axis %d given twice", axis));
    inserted[n] = true;
  }
  Shape out;
  std::size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) out.push_back(inserted[i] ? 1 : x[next++]);
  return Descs{{in[0].dtype, out}};
}

absl::StatusOr<Descs> Cast(absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  constexpr OpKind op = OpKind::kCast;
  const CastAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "input"));
  if (!DTypeIsFixedSize(a->to)) {
    return absl::UnimplementedError(
        absl::StrCat("Cast: cannot cast to ", DTypeName(a->to), ", which has no fixed size"));
  }
  return Descs{{a->to, in[0].shape}};
}

absl::StatusOr<Descs> Dispatch(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs& attrs) {
  switch (op) {
    case OpKind::kGemm:
      return Gemm(in, attrs);
    case OpKind::kMatMul:
      return MatMul(in);
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
      return Binary(op, in);
    case OpKind::kRelu:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kErf:
      return Unary(op, in);
    case OpKind::kSoftmax:
      return Softmax(in, attrs);
    case OpKind::kLayerNormalization:
      return LayerNorm(in, attrs);
    case OpKind::kGather:
      return Gather(in, attrs);
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
      return Reduce(op, in, attrs);
    case OpKind::kConcat:
      return Concat(in, attrs);
    case OpKind::kReshape:
      return Reshape(in, attrs);
    case OpKind::kFlatten:
      return Flatten(in, attrs);
    case OpKind::kTranspose:
      return Transpose(in, attrs);
    case OpKind::kUnsqueeze:
      return Unsqueeze(in, attrs);
    case OpKind::kSqueeze:
      return Squeeze(in, attrs);
    case OpKind::kIdentity:
      NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
      NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "input"));
      return Descs{in[0]};
    case OpKind::kCast:
      return Cast(in, attrs);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown op kind ", static_cast<int>(op)));
}

}  // namespace

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

absl::StatusOr<std::vector<TensorDesc>> InferOutputs(OpKind op, absl::Span<const TensorDesc> inputs,
                                                     const OpAttrs& attrs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    NDS_RETURN_IF_ERROR(ValidateShape(inputs[i].shape, absl::StrCat(OpKindName(op), " input ", i)));
  }
  return Dispatch(op, inputs, attrs);
}

}  // namespace ndserve::kernels
