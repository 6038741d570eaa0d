// Broadcasting binary ops (Add, Sub, Mul, Div) and FP32 unary math (Relu, Sigmoid, Tanh,
// Erf) on the CPU. Inner loops are plain and branch-free so the compiler vectorizes them.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/broadcast_loop.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/elementwise_ops.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

template <typename Op>
absl::Status Binary(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  const BroadcastPlan p = MakeBroadcastPlan(out[0].shape, in[0].shape, in[1].shape);
  switch (in[0].dtype) {
    case DType::kFp32:
      BroadcastBinary(in[0].as<const float>(), in[1].as<const float>(), out[0].as<float>(), p, Op());
      break;
    case DType::kInt32:
      BroadcastBinary(in[0].as<const int32_t>(), in[1].as<const int32_t>(), out[0].as<int32_t>(), p,
                 Op());
      break;
    case DType::kInt64:
      BroadcastBinary(in[0].as<const int64_t>(), in[1].as<const int64_t>(), out[0].as<int64_t>(), p,
                 Op());
      break;
    default:  // InferOutputs admits no other type
      return absl::InternalError("binary op: unexpected dtype");
  }
  return absl::OkStatus();
}

template <typename Op>
absl::Status Unary(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  const int64_t n = in[0].numel();
  Op op;
  for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
  return absl::OkStatus();
}

}  // namespace

absl::Status Add(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Binary<AddOp>(in, out);
}
absl::Status Sub(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Binary<SubOp>(in, out);
}
absl::Status Mul(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Binary<MulOp>(in, out);
}
absl::Status Div(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Binary<DivOp>(in, out);
}
absl::Status Relu(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary<ReluOp>(in, out);
}
absl::Status Sigmoid(const KernelContext&, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary<SigmoidOp>(in, out);
}
absl::Status Tanh(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary<TanhOp>(in, out);
}
absl::Status Erf(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Unary<ErfOp>(in, out);
}

}  // namespace ndserve::kernels::cpu
