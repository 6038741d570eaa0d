#ifndef NDSERVE_KERNELS_OP_KIND_H_
#define NDSERVE_KERNELS_OP_KIND_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ndserve::kernels {

// The ONNX operators (default domain) that have kernels, in the order of ops.def.
enum class OpKind : uint8_t {
#define NDS_OP(name, since, rules, cpu, cuda, host, flags) k##name,
#include "kernels/ops.def"
#undef NDS_OP
};
inline constexpr int kNumOpKinds = 0
#define NDS_OP(name, since, rules, cpu, cuda, host, flags) +1
#include "kernels/ops.def"
#undef NDS_OP
    ;

// Oldest and newest default-domain opset whose semantics the kernels implement.
inline constexpr int kMinOpset = 13;
inline constexpr int kMaxOpset = 17;

// Flags column of ops.def.
inline constexpr uint32_t kOpAlias = 1;
inline constexpr uint32_t kOpReadsShapes = 2;
inline constexpr uint32_t kOpDataShape = 4;
inline constexpr uint32_t kOpControl = 8;

// One row of ops.def, minus the functions (op_rules.h and dispatch.h reach those).
struct OpInfo {
  absl::string_view name;  // the ONNX op_type
  int since_opset;         // first opset supported; the last is kMaxOpset
  uint32_t host_inputs;    // bit i: input i is read on the host (see ops.def)
  bool alias;              // output aliases input 0's bytes
  bool reads_shapes_only;  // the kernel never reads its inputs' data
  bool data_shape;         // output dims depend on input values (kOpDataShape)
  bool control;            // run by the engine itself, no kernel (kOpControl: If)

  bool IsHostInput(int i) const { return i < 32 && (host_inputs >> i) & 1u; }
};

const OpInfo& GetOpInfo(OpKind op);

// The ONNX op_type: "Gemm", "LayerNormalization", ...
absl::string_view OpKindName(OpKind op);

// The operator `op_type` of `domain` as a model importing default-domain `opset` uses it.
// UNIMPLEMENTED naming the operator, the domain when not the default one, and the opset for
// anything the table does not run: "unsupported operator 'Celu' (opset 17)", or
// "LayerNormalization exists from opset 17; the model imports opset 13". opset 0 skips the
// opset checks (for callers that only map names).
absl::StatusOr<OpKind> OpKindFromOnnx(absl::string_view op_type, absl::string_view domain = "",
                                      int opset = 0);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_OP_KIND_H_
