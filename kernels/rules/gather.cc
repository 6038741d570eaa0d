// Rules of Gather, ScatterND, GatherElements, ScatterElements, OneHot, GatherND and NonZero.
#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {
namespace {

// The fused embedding bag (GatherAttrs::bag_mean): FP32 [rows, dim] by [batch, bag]
// indices, or [batch, features, bag] with a feature selected, gives [batch, dim].
absl::StatusOr<ScatterReduction> ReadReduction(OpKind op, const AttrMap& attrs) {
  NDS_ASSIGN_OR_RETURN(const std::string r, GetAttr<std::string>(op, attrs, "reduction", "none"));
  if (r == "add") return ScatterReduction::kAdd;
  if (r == "mul") return ScatterReduction::kMul;
  if (r != "none") {
    return absl::UnimplementedError(absl::StrCat(OpKindName(op), ": reduction '", r,
                                                 "' is not supported (none, add and mul are)"));
  }
  return ScatterReduction::kNone;
}

// The data a scatter writes into: any fixed-size type when updates replace elements,
// FP32, INT32 or INT64 when they are added or multiplied in; updates of data's type.
absl::Status CheckScatterData(OpKind op, ScatterReduction reduction, const TensorDesc& data,
                              const TensorDesc& updates) {
  if (reduction == ScatterReduction::kNone) {
    NDS_RETURN_IF_ERROR(CheckFixedSize(op, data, "data"));
  } else {
    NDS_RETURN_IF_ERROR(CheckDType(op, data, "data", {DType::kFp32, DType::kInt32, DType::kInt64}));
  }
  if (updates.dtype != data.dtype) {
    return Invalid(op, absl::StrCat("updates are ", DTypeName(updates.dtype), ", data ",
                                    DTypeName(data.dtype)));
  }
  return absl::OkStatus();
}

// GatherElements' and ScatterElements' indices against data: the same rank, and no dim
// but the axis larger than data's (PyTorch's rule for torch.gather and scatter).
absl::StatusOr<int64_t> CheckElementsIndices(OpKind op, int64_t axis, const TensorDesc& data,
                                             const TensorDesc& indices) {
  NDS_RETURN_IF_ERROR(CheckDType(op, indices, "indices", {DType::kInt32, DType::kInt64}));
  const ShapeSpan d = data.shape, i = indices.shape;
  NDS_ASSIGN_OR_RETURN(const int64_t a, NormalizeAxis(axis, d.size(), OpKindName(op)));
  bool fits = d.size() == i.size();
  for (std::size_t k = 0; fits && k < d.size(); ++k) {
    fits = static_cast<int64_t>(k) == a || i[k] <= d[k];
  }
  if (!fits) {
    return Invalid(op, absl::StrCat("indices ", ShapeToString(i), " must have the rank of data ",
                                    ShapeToString(d), " and no dim but axis ", a,
                                    " larger than data's"));
  }
  return a;
}

absl::StatusOr<Descs> InferBagMean(OpKind op, absl::Span<const TensorDesc> in,
                                   const GatherAttrs& a) {
  const ShapeSpan data = in[0].shape, ids = in[1].shape;
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "data", {DType::kFp32}));
  const std::size_t ids_rank = a.bag_select >= 0 ? 3 : 2;
  if (data.size() != 2 || a.axis != 0 || ids.size() != ids_rank ||
      (a.bag_select >= 0 && a.bag_select >= ids[1])) {
    const std::string want = a.bag_select >= 0
                                 ? absl::StrCat("[batch, features, bag] indices with more than ",
                                                a.bag_select, " features")
                                 : std::string("[batch, bag] indices");
    return Invalid(
        op, absl::StrCat("a fused embedding bag takes a [rows, dim] table and ", want,
                         ", not data ", ShapeToString(data), " and indices ", ShapeToString(ids)));
  }
  return Descs{{DType::kFp32, Shape{ids[0], data[1]}}};
}

}  // namespace

absl::StatusOr<OpAttrs> BuildGather(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  GatherAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", 0));
  NDS_ASSIGN_OR_RETURN(a.bag_mean, GetBoolAttr(op, attrs, kFusedBagMeanAttr, false));
  NDS_ASSIGN_OR_RETURN(a.bag_select, GetAttr<int64_t>(op, attrs, kFusedBagSelectAttr, -1));
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
  if (a->bag_mean) return InferBagMean(op, in, *a);
  NDS_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(a->axis, data.size(), "Gather"));
  Shape out(data.begin(), data.begin() + axis);
  out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  NDS_RETURN_IF_ERROR(ValidateShape(out, "Gather output"));
  return Descs{{in[0].dtype, out}};
}

// ScatterND: data with the slices that INT64 index tuples name replaced (or, opset 16's
// reduction, added to or multiplied by) updates; PyTorch exports indexed assignment
// (x[:, i] = v) as it.
absl::StatusOr<OpAttrs> BuildScatterND(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  ScatterNDAttrs a;
  NDS_ASSIGN_OR_RETURN(a.reduction, ReadReduction(op, attrs));
  return a;
}

// data (rank r), indices INT64 [..., k] with 1 <= k <= r, updates
// indices.shape[:-1] + data.shape[k:] of data's type; the output is data's.
absl::StatusOr<Descs> InferScatterND(OpKind op, absl::Span<const TensorDesc> in,
                                     const OpAttrs& attrs) {
  const ScatterNDAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 3, 3));
  NDS_RETURN_IF_ERROR(CheckScatterData(op, a->reduction, in[0], in[2]));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[1], "indices", {DType::kInt64}));
  const ShapeSpan data = in[0].shape, indices = in[1].shape, updates = in[2].shape;
  const int64_t k = indices.empty() ? 0 : indices.back();
  if (indices.empty() || k < 1 || k > static_cast<int64_t>(data.size())) {
    return Invalid(op, absl::StrCat("indices ", ShapeToString(indices),
                                    " must end in a dim of 1 to the rank of data ",
                                    ShapeToString(data)));
  }
  Shape want(indices.begin(), indices.end() - 1);
  want.insert(want.end(), data.begin() + k, data.end());
  if (!std::equal(want.begin(), want.end(), updates.begin(), updates.end())) {
    return Invalid(op, absl::StrCat("updates have shape ", ShapeToString(updates), ", expected ",
                                    ShapeToString(want), " (data ", ShapeToString(data),
                                    ", indices ", ShapeToString(indices), ")"));
  }
  return Descs{in[0]};
}

// GatherElements: out[c] = data[c with c[axis] replaced by indices[c]]; the output has
// the indices' shape and data's type.
absl::StatusOr<OpAttrs> BuildGatherElements(OpKind op, int, const AttrMap& attrs,
                                            const HostInputs&) {
  ElementsAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", 0));
  return a;
}

absl::StatusOr<Descs> InferGatherElements(OpKind op, absl::Span<const TensorDesc> in,
                                          const OpAttrs& attrs) {
  const ElementsAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "data"));
  NDS_RETURN_IF_ERROR(CheckElementsIndices(op, a->axis, in[0], in[1]).status());
  return Descs{{in[0].dtype, in[1].shape}};
}

// ScatterElements: data with out[c with c[axis] replaced by indices[c]] = updates[c] (or,
// opset 16's reduction, combined with it); updates have the indices' shape.
absl::StatusOr<OpAttrs> BuildScatterElements(OpKind op, int, const AttrMap& attrs,
                                             const HostInputs&) {
  ElementsAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", 0));
  NDS_ASSIGN_OR_RETURN(a.reduction, ReadReduction(op, attrs));
  return a;
}

absl::StatusOr<Descs> InferScatterElements(OpKind op, absl::Span<const TensorDesc> in,
                                           const OpAttrs& attrs) {
  const ElementsAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 3, 3));
  NDS_RETURN_IF_ERROR(CheckScatterData(op, a->reduction, in[0], in[2]));
  NDS_RETURN_IF_ERROR(CheckElementsIndices(op, a->axis, in[0], in[1]).status());
  if (in[2].shape != in[1].shape) {
    return Invalid(op, absl::StrCat("updates have shape ", ShapeToString(in[2].shape),
                                    ", indices ", ShapeToString(in[1].shape),
                                    "; they must be equal"));
  }
  return Descs{in[0]};
}

// OneHot: depth (host input 1, one number) and values (host input 2, [off, on], whose
// type the output takes).
absl::StatusOr<OpAttrs> BuildOneHot(OpKind op, int, const AttrMap& attrs, const HostInputs& host) {
  OneHotAttrs a;
  NDS_ASSIGN_OR_RETURN(a.axis, GetAttr<int64_t>(op, attrs, "axis", -1));
  NDS_ASSIGN_OR_RETURN(const std::optional<double> depth, host.Scalar(op, 1, "depth"));
  const HostValue* values = host.Get(2);
  if (!depth.has_value() || values == nullptr) {
    return Invalid(op, "depth and values must be given as constants");
  }
  // ONNX casts a fractional depth to an integer; past 2^40 classes no output would fit.
  if (!(*depth >= 1.0 && *depth < 0x1p40)) {
    return Invalid(op, absl::StrCat("depth must be at least 1, got ", *depth));
  }
  a.depth = static_cast<int64_t>(*depth);
  if (values->numel() != 2) {
    return Invalid(op, absl::StrCat("values must hold [off_value, on_value], got ",
                                    values->numel(), " elements"));
  }
  if (values->dtype != DType::kFp32 && values->dtype != DType::kInt32 &&
      values->dtype != DType::kInt64) {
    return absl::UnimplementedError(absl::StrCat("OneHot: values of type ",
                                                 DTypeName(values->dtype),
                                                 " are not supported (FP32, INT32, INT64 are)"));
  }
  a.dtype = values->dtype;
  if (values->IsReal()) {
    a.off = values->reals[0], a.on = values->reals[1];
  } else {
    a.off = static_cast<double>(values->ints[0]), a.on = static_cast<double>(values->ints[1]);
  }
  return a;
}

absl::StatusOr<Descs> InferOneHot(OpKind op, absl::Span<const TensorDesc> in,
                                  const OpAttrs& attrs) {
  const OneHotAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "indices", {DType::kInt32, DType::kInt64}));
  const ShapeSpan idx = in[0].shape;
  NDS_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(a->axis, idx.size() + 1, "OneHot"));
  Shape out(idx.begin(), idx.end());
  out.insert(out.begin() + axis, a->depth);
  NDS_RETURN_IF_ERROR(ValidateShape(out, "OneHot output"));
  return Descs{{a->dtype, out}};
}

// GatherND: indices [..., k] (INT64) pick slices of data: the output is indices' dims but
// the last, then data's dims after batch_dims + k. The first batch_dims dims of both are
// equal (opset 12's batch_dims; ONNX has no broadcasting there).
absl::StatusOr<OpAttrs> BuildGatherND(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  GatherNDAttrs a;
  NDS_ASSIGN_OR_RETURN(a.batch_dims, GetAttr<int64_t>(op, attrs, "batch_dims", 0));
  if (a.batch_dims < 0) return Invalid(op, "batch_dims must not be negative");
  return a;
}

absl::StatusOr<Descs> InferGatherND(OpKind op, absl::Span<const TensorDesc> in,
                                    const OpAttrs& attrs) {
  const GatherNDAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 2));
  NDS_RETURN_IF_ERROR(CheckFixedSize(op, in[0], "data"));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[1], "indices", {DType::kInt64}));
  const ShapeSpan d = in[0].shape, i = in[1].shape;
  const int64_t b = a->batch_dims;
  if (d.empty() || i.empty() || b >= static_cast<int64_t>(std::min(d.size(), i.size()))) {
    return Invalid(op, absl::StrCat("data ", ShapeToString(d), " and indices ", ShapeToString(i),
                                    " must both have more than batch_dims = ", b, " dims"));
  }
  const int64_t k = i.back();
  if (k < 1 || b + k > static_cast<int64_t>(d.size())) {
    return Invalid(op, absl::StrCat("the last dim of indices ", ShapeToString(i),
                                    " must be 1 to ", d.size() - b, " for data ",
                                    ShapeToString(d), " and batch_dims ", b));
  }
  for (int64_t j = 0; j < b; ++j) {
    if (d[j] != i[j]) {
      return Invalid(op, absl::StrCat("data ", ShapeToString(d), " and indices ", ShapeToString(i),
                                      " differ in batch dim ", j));
    }
  }
  Shape out(i.begin(), i.end() - 1);
  out.insert(out.end(), d.begin() + b + k, d.end());
  // Tuples times slice elements can overflow where neither input does.
  NDS_RETURN_IF_ERROR(ValidateShape(out, "GatherND output"));
  return Descs{{in[0].dtype, out}};
}

// NonZero: [rank, count] INT64, the coordinates of the non-zero elements in row-major
// order; count is known only from the data (kOpDataShape). A scalar counts as one
// element of a 1-D tensor, as numpy's nonzero reads a 0-d array.
absl::StatusOr<OpAttrs> BuildNonZero(OpKind, int, const AttrMap&, const HostInputs&) {
  return NoAttrs{};
}

absl::StatusOr<Descs> InferNonZero(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 1, 1));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "input",
                                 {DType::kFp32, DType::kInt32, DType::kInt64, DType::kBool,
                                  DType::kUint8, DType::kInt8}));
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(in[0].shape.size()));
  return Descs{{DType::kInt64, Shape{rank, kDataDependentDim}}};
}

}  // namespace ndserve::kernels::rules
