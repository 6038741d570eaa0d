// The math family's broadcasting ops on the CPU: Pow, Mod, the variadic Min and Max, the
// comparisons Equal/Less/Greater (BOOL out), And/Or and Where. All walk BroadcastPlans
// (plans.h) with the loops of broadcast_loop.h over the functors of kernels/math_ops.h.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/broadcast_loop.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/numeric_dispatch.h"
#include "kernels/math_ops.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

// out = op(a, b) for two inputs broadcast to out, element types A and B, output O.
template <typename A, typename B, typename O, typename Op>
void Broadcast2(const TensorView& a, const TensorView& b, const TensorView& out, Op op) {
  const BroadcastPlan p = MakeBroadcastPlan(out.shape, a.shape, b.shape);
  BroadcastBinary(a.as<const A>(), b.as<const B>(), out.as<O>(), p, op);
}

// Min / Max over 1..N inputs: the first pair into the output, then each further input
// folded into the output in place (same shape, so each element is read before written).
template <typename Op>
absl::Status Variadic(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  const TensorView& y = out[0];
  if (in.size() == 1) {
    if (y.data != in[0].data && y.nbytes() > 0) std::memcpy(y.data, in[0].data, y.nbytes());
    return absl::OkStatus();
  }
  return ForNumeric(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    Broadcast2<T, T, T>(in[0], in[1], y, Op());
    for (std::size_t k = 2; k < in.size(); ++k) Broadcast2<T, T, T>(y, in[k], y, Op());
  });
}

template <typename Op>
absl::Status Compare(absl::Span<const TensorView> in, absl::Span<const TensorView> out) {
  return ForNumeric(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Broadcast2<T, T, uint8_t>(in[0], in[1], out[0], Op());
  });
}

struct SelectOp {
  template <typename T>
  T operator()(uint8_t c, T x, T y) const {
    return c != 0 ? x : y;
  }
};

template <typename T>
void WhereTyped(absl::Span<const TensorView> in, const TensorView& out) {
  const BroadcastPlan p = MakeBroadcastPlan(out.shape, in[0].shape, in[1].shape, in[2].shape);
  BroadcastTernary(in[0].as<const uint8_t>(), in[1].as<const T>(), in[2].as<const T>(), out.as<T>(),
                   p, SelectOp());
}

}  // namespace

absl::Status Pow(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  switch (in[1].dtype) {
    case DType::kFp32:
      Broadcast2<float, float, float>(in[0], in[1], out[0], PowOp());
      return absl::OkStatus();
    case DType::kInt32:
      Broadcast2<float, int32_t, float>(in[0], in[1], out[0], PowOp());
      return absl::OkStatus();
    case DType::kInt64:
      Broadcast2<float, int64_t, float>(in[0], in[1], out[0], PowOp());
      return absl::OkStatus();
    default:
      return absl::InternalError("Pow: unexpected exponent dtype");
  }
}

absl::Status Mod(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const bool fmod = std::get<ModAttrs>(attrs).fmod;
  return ForNumeric(out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (fmod) {
      Broadcast2<T, T, T>(in[0], in[1], out[0], FmodOp());
    } else if constexpr (std::is_integral_v<T>) {
      Broadcast2<T, T, T>(in[0], in[1], out[0], ModOp());
    }
  });
}

absl::Status Min(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Variadic<MinOp>(in, out);
}
absl::Status Max(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  return Variadic<MaxOp>(in, out);
}

absl::Status Equal(const KernelContext&, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  if (in[0].dtype == DType::kBool) {
    Broadcast2<uint8_t, uint8_t, uint8_t>(in[0], in[1], out[0], BoolEqualOp());
    return absl::OkStatus();
  }
  return Compare<EqualOp>(in, out);
}
absl::Status Less(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  return Compare<LessOp>(in, out);
}
absl::Status Greater(const KernelContext&, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs&) {
  return Compare<GreaterOp>(in, out);
}

absl::Status LessOrEqual(const KernelContext&, absl::Span<const TensorView> in,
                         absl::Span<const TensorView> out, const OpAttrs&) {
  return Compare<LessOrEqualOp>(in, out);
}
absl::Status GreaterOrEqual(const KernelContext&, absl::Span<const TensorView> in,
                            absl::Span<const TensorView> out, const OpAttrs&) {
  return Compare<GreaterOrEqualOp>(in, out);
}
absl::Status Xor(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  Broadcast2<uint8_t, uint8_t, uint8_t>(in[0], in[1], out[0], XorOp());
  return absl::OkStatus();
}
absl::Status And(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  Broadcast2<uint8_t, uint8_t, uint8_t>(in[0], in[1], out[0], AndOp());
  return absl::OkStatus();
}
absl::Status Or(const KernelContext&, absl::Span<const TensorView> in,
                absl::Span<const TensorView> out, const OpAttrs&) {
  Broadcast2<uint8_t, uint8_t, uint8_t>(in[0], in[1], out[0], OrOp());
  return absl::OkStatus();
}

absl::Status Not(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs&) {
  const uint8_t* x = in[0].as<const uint8_t>();
  uint8_t* y = out[0].as<uint8_t>();
  const int64_t n = in[0].numel();
  const NotOp op;
  for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
  return absl::OkStatus();
}

absl::Status Where(const KernelContext&, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs&) {
  // Only the element size matters for a select, so any fixed-size type is one of four.
  switch (DTypeSize(in[1].dtype)) {
    case 1:
      WhereTyped<uint8_t>(in, out[0]);
      break;
    case 2:
      WhereTyped<uint16_t>(in, out[0]);
      break;
    case 4:
      WhereTyped<uint32_t>(in, out[0]);
      break;
    case 8:
      WhereTyped<uint64_t>(in, out[0]);
      break;
    default:
      return absl::InternalError("Where: unexpected element size");
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
