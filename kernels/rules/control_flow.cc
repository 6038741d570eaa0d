// Rules of If. The loader inlines both branches into the graph (engine/onnx_loader.cc);
// what is left of the node is [cond, then outputs..., else outputs...] -> outputs, and
// the engine gives each output the taken branch's value without a kernel call.
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

}  // namespace ndserve::kernels::rules
