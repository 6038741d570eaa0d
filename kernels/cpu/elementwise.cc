// Broadcasting binary ops (Add, Sub, Mul, Div) and FP32 unary math (Relu, Sigmoid, Tanh,
// Erf) on the CPU. Inner loops are plain and branch-free so the compiler vectorizes them.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include <algorithm>

#include "kernels/cpu/broadcast_loop.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/cpu/parallel.h"
#include "kernels/elementwise_ops.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

// FP32 rows [row0, row1) of one op, one AVX2 + FMA clone each (docs/design.md section 4):
// built for the baseline, a transformer's score scaling (Div of 1 x 4 x 128 x 128 by a
// scalar) ran four lanes at a time on one thread, 20-25 us per node at seq 128.
#define NDS_FLOAT_BINARY(Name, OpType)                                                       \
  NDS_CPU_CLONES                                                                           \
  void Name(const float* a, const float* b, float* y, const BroadcastPlan& p, int64_t row0, \
            int64_t row1) {                                                                \
    BroadcastBinaryRows(a, b, y, p, row0, row1, OpType());                                 \
  }
NDS_FLOAT_BINARY(AddRows, AddOp)
NDS_FLOAT_BINARY(SubRows, SubOp)
NDS_FLOAT_BINARY(MulRows, MulOp)
NDS_FLOAT_BINARY(DivRows, DivOp)
#undef NDS_FLOAT_BINARY

// Elements per ParallelFor chunk of an FP32 binary op. A pass over a tensor that fits the
// two cores' L2 is no faster on two threads: the producer left half of it in each core's
// L2, and the 1 x 4 x 128 x 128 score scaling took 39 us on two threads against 17 us on
// one (bert seq128 b1). From 1 MB per chunk, memory bandwidth is what two threads add.
constexpr int64_t kBinaryGrain = int64_t{256} << 10;

template <typename Op>
void FloatBinary(const float* a, const float* b, float* y, const BroadcastPlan& p) {
  const int64_t rows = BroadcastRows(p);
  const int64_t n = std::max<int64_t>(1, p.numel / std::max<int64_t>(1, rows));
  ParallelFor(rows, std::max<int64_t>(1, kBinaryGrain / n), [&](int64_t r0, int64_t r1) {
    if constexpr (std::is_same_v<Op, AddOp>) AddRows(a, b, y, p, r0, r1);
    if constexpr (std::is_same_v<Op, SubOp>) SubRows(a, b, y, p, r0, r1);
    if constexpr (std::is_same_v<Op, MulOp>) MulRows(a, b, y, p, r0, r1);
    if constexpr (std::is_same_v<Op, DivOp>) DivRows(a, b, y, p, r0, r1);
  });
}

template <typename Op>
absl::Status Binary(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  const BroadcastPlan p = MakeBroadcastPlan(out[0].shape, in[0].shape, in[1].shape);
  switch (in[0].dtype) {
    case DType::kFp32:
      FloatBinary<Op>(in[0].as<const float>(), in[1].as<const float>(), out[0].as<float>(), p);
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

// Split like the binary ops: efficientnet_b0's 96 x 112 x 112 Sigmoid is 5 MB.
template <typename Op>
absl::Status Unary(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  const int64_t n = in[0].numel();
  ParallelFor(n, kBinaryGrain, [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<Op, SigmoidOp>) {
      SigmoidArray(x + b, y + b, e - b);
    } else {
      Op op;
      for (int64_t i = b; i < e; ++i) y[i] = op(x[i]);
    }
  });
  return absl::OkStatus();
}

}  // namespace

// In the baseline build the polynomial runs four floats at a time without FMA: 1.6 ns per
// float against 0.48 (AVX2 + FMA) and 0.31 (AVX-512) on this project's Zen 4 VM.
NDS_CPU_CLONES_V4
void SigmoidArray(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = HostSigmoid(x[i]);
}

// Cloned too: its product loop ran four floats at a time in the baseline build (3 % of
// efficientnet_b0's run on one thread). One multiply per float, so every clone gives the
// Mul node's bits.
NDS_CPU_CLONES_V4
void SiluArray(const float* x, float* y, int64_t n) {
  constexpr int64_t kChunk = 256;
  float s[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    SigmoidArray(x + i, s, m);
    for (int64_t j = 0; j < m; ++j) y[i + j] = x[i + j] * s[j];  // MulOp's one rounding
  }
}

bool LateActivationInPlace(ConvActivation kind, float* y, int64_t n) {
  if (kind == ConvActivation::kHardSwish) {
    HardSwishArray(y, y, n);
    return true;
  }
  if (kind == ConvActivation::kSigmoid) {
    SigmoidArray(y, y, n);
    return true;
  }
  if (kind == ConvActivation::kSilu) {
    SiluArray(y, y, n);
    return true;
  }
  return false;
}

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
