#include "kernels/shape_inference.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/op_rules.h"

namespace ndserve::kernels {

absl::StatusOr<std::vector<TensorDesc>> InferOutputs(OpKind op, absl::Span<const TensorDesc> inputs,
                                                     const OpAttrs& attrs) {
  // Runs for every node of every request: the message's name is built only on failure.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!ValidateShape(inputs[i].shape, "").ok()) {
      return ValidateShape(inputs[i].shape, absl::StrCat(OpKindName(op), " input ", i));
    }
  }
  switch (op) {
#define NDS_OP(name, since, rules_fn, cpu, cuda, host, flags) \
  case OpKind::k##name:                                      \
    return rules::Infer##rules_fn(op, inputs, attrs);
#include "kernels/ops.def"
#undef NDS_OP
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown op kind ", static_cast<int>(op)));
}

}  // namespace ndserve::kernels
