// Broadcasting binary ops (Add, Sub, Mul, Div) and FP32 unary math (Relu, Sigmoid, Tanh,
// Erf) on the CPU. Inner loops are plain and branch-free so the compiler vectorizes them.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/row_walker.h"
#include "kernels/elementwise_ops.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

template <typename T, typename Op>
void BinaryLoop(const T* a, const T* b, T* out, const BroadcastPlan& p, Op op) {
  if (p.numel == 0) return;
  if (p.dims.empty()) {
    out[0] = op(a[0], b[0]);
    return;
  }
  const int64_t n = p.dims.back();
  const int64_t sa = p.a_strides.back(), sb = p.b_strides.back();
  RowWalker<2> walk(p.dims, {ShapeSpan(p.a_strides), ShapeSpan(p.b_strides)});
  for (int64_t row = 0; row < p.numel / n; ++row, walk.Next()) {
    const T* ra = a + walk.offset(0);
    const T* rb = b + walk.offset(1);
    T* ro = out + row * n;
    // After merging, an operand's innermost stride is 1 or 0 (broadcast).
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) ro[i] = op(ra[i], rb[i]);
    } else if (sa == 1) {
      const T bv = rb[0];
      for (int64_t i = 0; i < n; ++i) ro[i] = op(ra[i], bv);
    } else if (sb == 1) {
      const T av = ra[0];
      for (int64_t i = 0; i < n; ++i) ro[i] = op(av, rb[i]);
    } else {
      const T v = op(ra[0], rb[0]);
      for (int64_t i = 0; i < n; ++i) ro[i] = v;
    }
  }
}

template <typename Op>
absl::Status Binary(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  const BroadcastPlan p = MakeBroadcastPlan(out[0].shape, in[0].shape, in[1].shape);
  switch (in[0].dtype) {
    case DType::kFp32:
      BinaryLoop(in[0].as<const float>(), in[1].as<const float>(), out[0].as<float>(), p, Op());
      break;
    case DType::kInt32:
      BinaryLoop(in[0].as<const int32_t>(), in[1].as<const int32_t>(), out[0].as<int32_t>(), p,
                 Op());
      break;
    case DType::kInt64:
      BinaryLoop(in[0].as<const int64_t>(), in[1].as<const int64_t>(), out[0].as<int64_t>(), p,
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
