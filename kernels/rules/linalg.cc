// Rules of Gemm and MatMul, fused ones (engine/fusion.h) included.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/op_rules.h"
#include "kernels/plans.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {

namespace {

// The epilogue of a fused node (engine/fusion.h), from its internal attributes.
absl::StatusOr<GemmEpilogue> BuildEpilogue(OpKind op, const AttrMap& attrs) {
  GemmEpilogue e;
  NDS_ASSIGN_OR_RETURN(std::optional<std::string> act,
                       FindAttr<std::string>(op, attrs, kFusedActivationAttr));
  if (!act.has_value()) return e;
  NDS_ASSIGN_OR_RETURN(std::vector<float> params,
                       GetAttr<std::vector<float>>(op, attrs, kFusedActivationParamsAttr, {}));
  std::size_t want = 0;
  if (*act == "Relu") {
    e.activation = GemmActivation::kRelu;
  } else if (*act == "Clip") {
    e.activation = GemmActivation::kClip;
    want = 2;
  } else if (*act == "Gelu") {
    e.activation = GemmActivation::kGelu;
    want = 3;
  } else if (*act == "Div") {
    e.activation = GemmActivation::kDiv;
    want = 1;
  } else {
    return Invalid(op, absl::StrCat("unknown fused activation '", *act, "'"));
  }
  if (params.size() != want) {
    return Invalid(op, absl::StrFormat("fused activation %s takes %d parameters, got %d", *act,
                                       want, params.size()));
  }
  if (want > 0) e.p0 = params[0];
  if (want > 1) e.p1 = params[1];
  if (want > 2) e.p2 = params[2];
  return e;
}

}  // namespace

absl::StatusOr<OpAttrs> BuildGemm(OpKind op, int, const AttrMap& attrs, const HostInputs&) {
  GemmAttrs a;
  NDS_ASSIGN_OR_RETURN(a.alpha, GetAttr<float>(op, attrs, "alpha", 1.0f));
  NDS_ASSIGN_OR_RETURN(a.beta, GetAttr<float>(op, attrs, "beta", 1.0f));
  NDS_ASSIGN_OR_RETURN(a.trans_a, GetBoolAttr(op, attrs, "transA", false));
  NDS_ASSIGN_OR_RETURN(a.trans_b, GetBoolAttr(op, attrs, "transB", false));
  NDS_ASSIGN_OR_RETURN(a.epilogue, BuildEpilogue(op, attrs));
  return a;
}

absl::StatusOr<Descs> InferGemm(OpKind op, absl::Span<const TensorDesc> in,
                                const OpAttrs& attrs) {
  const GemmAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 2, 3));
  for (std::size_t i = 0; i < in.size(); ++i) {
    NDS_RETURN_IF_ERROR(CheckDType(op, in[i], i, {DType::kFp32}));
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
  const Shape out = {p.m, p.n};
  if (in.size() == 3 && !IsUnidirectionallyBroadcastable(in[2].shape, out)) {
    return Invalid(op, absl::StrCat("C of shape ", ShapeToString(in[2].shape),
                                    " does not broadcast to the output ", ShapeToString(out)));
  }
  return Descs{{DType::kFp32, out}};
}

absl::StatusOr<OpAttrs> BuildMatMul(OpKind op, int opset, const AttrMap& attrs,
                                    const HostInputs& host) {
  NDS_ASSIGN_OR_RETURN(const bool bias, GetBoolAttr(op, attrs, kFusedMatMulBiasAttr, false));
  NDS_ASSIGN_OR_RETURN(const GemmEpilogue epilogue, BuildEpilogue(op, attrs));
  if (!bias && epilogue.activation == GemmActivation::kNone) {
    return NoAttrsRule(op, opset, attrs, host);
  }
  GemmAttrs a;
  a.epilogue = epilogue;
  a.matmul_bias = bias;
  return a;
}

absl::StatusOr<Descs> InferMatMul(OpKind op, absl::Span<const TensorDesc> in,
                                  const OpAttrs& attrs) {
  // A fused MatMul (GemmAttrs) may carry a bias as its third input.
  const GemmAttrs* fused = std::get_if<GemmAttrs>(&attrs);
  const bool bias = fused != nullptr && fused->matmul_bias;
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, bias ? 3 : 2, bias ? 3 : 2));
  for (std::size_t i = 0; i < in.size(); ++i) {
    NDS_RETURN_IF_ERROR(CheckDType(op, in[i], i, {DType::kFp32}));
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
  if (bias && (out.empty() || in[2].shape != Shape{out.back()})) {
    return Invalid(op,
                   absl::StrCat("the fused bias of shape ", ShapeToString(in[2].shape),
                                " is not one value per column of the output ", ShapeToString(out)));
  }
  return Descs{{DType::kFp32, out}};
}

}  // namespace ndserve::kernels::rules
