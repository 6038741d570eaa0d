#ifndef NDSERVE_KERNELS_OP_KIND_H_
#define NDSERVE_KERNELS_OP_KIND_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ndserve::kernels {

// The ONNX operators (default domain, opsets 13 to 17) that have kernels.
enum class OpKind : uint8_t {
  kGemm,
  kMatMul,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kRelu,
  kSigmoid,
  kTanh,
  kErf,
  kSoftmax,
  kLayerNormalization,
  kGather,
  kReduceSum,
  kReduceMean,
  kConcat,
  kReshape,
  kFlatten,
  kTranspose,
  kUnsqueeze,
  kSqueeze,
  kIdentity,
  kCast,
};
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::kCast) + 1;

// Oldest and newest default-domain opset whose semantics the kernels implement.
inline constexpr int kMinOpset = 13;
inline constexpr int kMaxOpset = 17;

// The ONNX op_type: "Gemm", "LayerNormalization", ...
absl::string_view OpKindName(OpKind op);
// UNIMPLEMENTED naming the operator (and its domain when not the default one) for
// anything without a kernel, e.g. "unsupported operator 'Celu'".
absl::StatusOr<OpKind> OpKindFromOnnx(absl::string_view op_type, absl::string_view domain = "");

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_OP_KIND_H_
