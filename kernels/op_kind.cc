#include "kernels/op_kind.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ndserve::kernels {
namespace {

constexpr std::array<OpInfo, kNumOpKinds> kOps = {{
#define NDS_OP(name, since, rules, cpu, cuda, host, flags) \
  {#name, since, host, ((flags) & kOpAlias) != 0, ((flags) & kOpReadsShapes) != 0, \
   ((flags) & kOpDataShape) != 0, ((flags) & kOpControl) != 0},
#include "kernels/ops.def"
#undef NDS_OP
}};

constexpr OpInfo kInvalid = {"<invalid op>", kMinOpset, 0, false, false};

}  // namespace

const OpInfo& GetOpInfo(OpKind op) {
  const auto i = static_cast<std::size_t>(op);
  return i < kOps.size() ? kOps[i] : kInvalid;
}

absl::string_view OpKindName(OpKind op) { return GetOpInfo(op).name; }

absl::StatusOr<OpKind> OpKindFromOnnx(absl::string_view op_type, absl::string_view domain,
                                      int opset) {
  const std::string at_opset = opset > 0 ? absl::StrFormat(" (opset %d)", opset) : "";
  if (!domain.empty() && domain != "ai.onnx") {
    return absl::UnimplementedError(absl::StrCat("unsupported operator '", op_type,
                                                 "' of domain '", domain, "'", at_opset));
  }
  for (int i = 0; i < kNumOpKinds; ++i) {
    if (kOps[i].name != op_type) continue;
    if (opset > 0 && (opset < kOps[i].since_opset || opset > kMaxOpset)) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s is supported at opsets %d to %d; the model imports opset %d", op_type,
          kOps[i].since_opset, kMaxOpset, opset));
    }
    return static_cast<OpKind>(i);
  }
  return absl::UnimplementedError(
      absl::StrCat("unsupported operator '", op_type, "'", at_opset));
}

}  // namespace ndserve::kernels
