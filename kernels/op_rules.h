#ifndef NDSERVE_KERNELS_OP_RULES_H_
#define NDSERVE_KERNELS_OP_RULES_H_

// The per-op rules named by the Rules column of ops.def, defined by family in
// kernels/rules/*.cc:
//  - Build<Rules> builds the op's attribute struct from ONNX attributes and host inputs
//    (what BuildOpAttrs, node_attrs.h, dispatches to);
//  - Infer<Rules> gives the output types and shapes from the data inputs (what
//    InferOutputs, shape_inference.h, dispatches to), and so decides what the op accepts.
// Both are pure functions; thread-safe.

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/node_attrs.h"
#include "kernels/op_attrs.h"
#include "kernels/op_kind.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels::rules {

#define NDS_OP(name, since, rules_fn, cpu, cuda, host_mask, flags)                          \
  absl::StatusOr<OpAttrs> Build##rules_fn(OpKind op, int opset, const AttrMap& attrs,    \
                                          const HostInputs& host);                       \
  absl::StatusOr<std::vector<TensorDesc>> Infer##rules_fn(                               \
      OpKind op, absl::Span<const TensorDesc> inputs, const OpAttrs& attrs);
#include "kernels/ops.def"
#undef NDS_OP

// Rules for ops without attributes.
inline absl::StatusOr<OpAttrs> NoAttrsRule(OpKind, int, const AttrMap&, const HostInputs&) {
  return NoAttrs{};
}

}  // namespace ndserve::kernels::rules

#endif  // NDSERVE_KERNELS_OP_RULES_H_
