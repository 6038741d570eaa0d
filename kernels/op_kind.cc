#include "kernels/op_kind.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace ndserve::kernels {
namespace {

constexpr std::array<absl::string_view, kNumOpKinds> kNames = {
    "Gemm",      "MatMul",    "Add",        "Sub",      "Mul",     "Div",
    "Relu",      "Sigmoid",   "Tanh",       "Erf",      "Softmax", "LayerNormalization",
    "Gather",    "ReduceSum", "ReduceMean", "Concat",   "Reshape", "Flatten",
    "Transpose", "Unsqueeze", "Squeeze",    "Identity", "Cast",
};

}  // namespace

absl::string_view OpKindName(OpKind op) {
  const auto i = static_cast<std::size_t>(op);
  return i < kNames.size() ? kNames[i] : absl::string_view("<invalid op>");
}

absl::StatusOr<OpKind> OpKindFromOnnx(absl::string_view op_type, absl::string_view domain) {
  if (!domain.empty() && domain != "ai.onnx") {
    return absl::UnimplementedError(
        absl::StrCat("unsupported operator '", op_type, "' of domain '", domain, "'"));
  }
  for (int i = 0; i < kNumOpKinds; ++i) {
    if (kNames[i] == op_type) return static_cast<OpKind>(i);
  }
  return absl::UnimplementedError(absl::StrCat("unsupported operator '", op_type, "'"));
}

}  // namespace ndserve::kernels
