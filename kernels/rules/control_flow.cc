// Rules of If and Loop. The loader inlines both branches and loop bodies into the graph
// (engine/onnx_loader.cc). What is left of an If is [cond, then outputs..., else
// outputs...] -> outputs, and the engine gives each output the taken branch's value
// without a kernel call; what is left of a Loop is [trip count, cond, initial values...,
// body outputs..., outer values the body reads...] -> outputs, and the engine runs the
// body's nodes per iteration (PredictorContext::RunLoop).
#include "absl/strings/str_cat.h"
#include "kernels/op_rules.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels::rules {

absl::StatusOr<OpAttrs> BuildIf(OpKind, int, const AttrMap&, const HostInputs&) {
  return NoAttrs{};
}

// Only the condition can be checked: the branch not taken has no values.
absl::StatusOr<Descs> InferIf(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  if (in.empty()) return Invalid(op, "the node has no condition");
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "cond", {DType::kBool}));
  if (NumElements(in[0].shape) != 1) {
    return Invalid(op, absl::StrCat("cond must hold one value, it is ",
                                    ShapeToString(in[0].shape)));
  }
  return absl::InternalError("If: its outputs are the taken branch's, chosen by the engine");
}

absl::StatusOr<OpAttrs> BuildLoop(OpKind, int, const AttrMap&, const HostInputs&) {
  return NoAttrs{};
}

// The trip count and the condition; the rest is the body's, checked per iteration.
absl::StatusOr<Descs> InferLoop(OpKind op, absl::Span<const TensorDesc> in, const OpAttrs&) {
  if (in.size() < 2) return Invalid(op, "the node needs a trip count and a condition");
  NDS_RETURN_IF_ERROR(CheckDType(op, in[0], "M", {DType::kInt64}));
  NDS_RETURN_IF_ERROR(CheckDType(op, in[1], "cond", {DType::kBool}));
  for (int i = 0; i < 2; ++i) {
    if (NumElements(in[i].shape) != 1) {
      return Invalid(op, absl::StrCat(i == 0 ? "M" : "cond", " must hold one value, it is ",
                                      ShapeToString(in[i].shape)));
    }
  }
  return absl::InternalError("Loop: its outputs are made by the engine, iteration by iteration");
}

}  // namespace ndserve::kernels::rules
