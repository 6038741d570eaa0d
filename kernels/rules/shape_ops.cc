// Rules of the data-movement ops: Concat, Transpose, DepthToSpace, SpaceToDepth, Cast,
// and the aliasing ones (Reshape, Flatten, Squeeze, Unsqueeze, Identity), whose
// shape-deciding inputs are host inputs.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/op_rules.h"
#include "kernels/plans.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {

absl::StatusOr<OpAttrs> BuildConcat(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  ConcatAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, RequireAttr<int64_t>(op, attrs, "axis"));
  return a;
}

absl::StatusOr<OpAttrs> BuildReshape(OpKind op, int, const AttrMap& attrs,
                                     const HostInputs& host) {
  NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> shape, host.Ints(op, 1, "shape"));
  if (!shape.has_value()) return Invalid(op, "the shape input is missing");
  ReshapeAttrs a;
  a.shape = *std::move(shape);
  NDS_ASSIGN_OR_RETURN(a.allowzero, GetBoolAttr(op, attrs, "allowzero", false));
  return a;
}

absl::StatusOr<OpAttrs> BuildFlatten(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  FlattenAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", 1));
  return a;
}

absl::StatusOr<OpAttrs> BuildTranspose(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  TransposeAttrs a;
  NDS_ASSIGN_OR_RETURN(a.perm, GetAttr<std::vector<int64_t>>(op, attrs, "perm", {}));
  return a;
}

absl::StatusOr<OpAttrs> BuildSqueeze(OpKind op, int, const AttrMap&, const HostInputs& host) {
  NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, host.Ints(op, 1, "axes"));
  return SqueezeAttrs{axes.value_or(std::vector<int64_t>())};
}

absl::StatusOr<OpAttrs> BuildUnsqueeze(OpKind op, int, const AttrMap&, const HostInputs& host) {
  NDS_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, host.Ints(op, 1, "axes"));
  if (!axes.has_value()) return Invalid(op, "the axes input is missing");
  return UnsqueezeAttrs{*std::move(axes)};
}

absl::StatusOr<OpAttrs> BuildIdentity(OpKind op, int opset, const AttrMap& attrs,
                                      const HostInputs& host) {
  return NoAttrsRule(op, opset, attrs, host);
}

absl::StatusOr<OpAttrs> BuildCast(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  NDS_ASSIGN_OR_RETURN(int64_t to, RequireAttr<int64_t>(op, attrs, "to"));
  NDS_ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(to));
  return CastAttrs{dtype};
}

absl::StatusOr<Descs> InferIdentity(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "input"));
  return Descs{in[0]};
}

absl::StatusOr<Descs> InferConcat(OpKind op, absl::Span<const TensorDesc> in,
                                 const OpAttrs& attrs) {
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

absl::StatusOr<Descs> InferReshape(OpKind op, absl::Span<const TensorDesc> in,
                                 const OpAttrs& attrs) {
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

absl::StatusOr<Descs> InferFlatten(OpKind op, absl::Span<const TensorDesc> in,
                                 const OpAttrs& attrs) {
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
      {in[0].dtype, Shape{NumElements(x.subspan(0, axis)), NumElements(x.subspan(axis))}}};
}

absl::StatusOr<Descs> InferTranspose(OpKind op, absl::Span<const TensorDesc> in,
                                 const OpAttrs& attrs) {
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

absl::StatusOr<Descs> InferSqueeze(OpKind op, absl::Span<const TensorDesc> in,
                                 const OpAttrs& attrs) {
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

absl::StatusOr<Descs> InferUnsqueeze(OpKind op, absl::Span<const TensorDesc> in,
                                 const OpAttrs& attrs) {
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

absl::StatusOr<Descs> InferCast(OpKind op, absl::Span<const TensorDesc> in,
                                 const OpAttrs& attrs) {
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

// DepthToSpace (mode DCR, ONNX's default, or CRD, which PyTorch's PixelShuffle exports)
// and SpaceToDepth (PixelUnshuffle's inverse move).
absl::StatusOr<OpAttrs> BuildDepthSpace(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  DepthSpaceAttrs a;
  a.to_space = op == OpKind::kDepthToSpace;
  NDS_ASSIGN_OR_RETURN(a.blocksize, RequireAttr<int64_t>(op, attrs, "blocksize"));
  if (a.blocksize < 1) {
    return Invalid(op, absl::StrCat("blocksize must be at least 1, got ", a.blocksize));
  }
  if (a.to_space) {
    NDS_ASSIGN_OR_RETURN(const std::string mode, GetAttr<std::string>(op, attrs, "mode", "DCR"));
    if (mode != "DCR" && mode != "CRD") {
      return Invalid(op, absl::StrCat("mode must be DCR or CRD, got '", mode, "'"));
    }
    a.crd = mode == "CRD";
  }
  return a;
}

// X (N, C, H, W). DepthToSpace: C divisible by blocksize^2, Y (N, C/b^2, H*b, W*b).
// SpaceToDepth: H and W divisible by blocksize, Y (N, C*b^2, H/b, W/b).
absl::StatusOr<Descs> InferDepthSpace(OpKind op, absl::Span<const TensorDesc> in,
                                      const OpAttrs& attrs) {
  const DepthSpaceAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "input"));
  const ShapeSpan x = in[0].shape;
  if (x.size() != 4) {
    return Invalid(op, absl::StrCat("input must be (N, C, H, W), got ", ShapeToString(x)));
  }
  const int64_t b = a->blocksize;
  int64_t bb = 0;
  if (__builtin_mul_overflow(b, b, &bb)) bb = 0;
  if (a->to_space) {
    if (bb == 0 || x[1] % bb != 0) {
      return Invalid(op, absl::StrCat("the channels of ", ShapeToString(x),
                                      " are not a multiple of blocksize^2 (blocksize ", b, ")"));
    }
    int64_t h = 0, w = 0;
    if (__builtin_mul_overflow(x[2], b, &h) || __builtin_mul_overflow(x[3], b, &w)) {
      return Invalid(op, absl::StrCat("blocksize ", b, " is too large for ", ShapeToString(x)));
    }
    return Descs{{in[0].dtype, Shape{x[0], x[1] / bb, h, w}}};
  }
  int64_t c = 0;
  if (x[2] % b != 0 || x[3] % b != 0) {
    return Invalid(op, absl::StrCat("the height and width of ", ShapeToString(x),
                                    " are not multiples of blocksize ", b));
  }
  if (bb == 0 || __builtin_mul_overflow(x[1], bb, &c)) {
    return Invalid(op, absl::StrCat("blocksize ", b, " is too large for ", ShapeToString(x)));
  }
  return Descs{{in[0].dtype, Shape{x[0], c, x[2] / b, x[3] / b}}};
}

}  // namespace ndserve::kernels::rules
