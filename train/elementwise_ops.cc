#include "train/elementwise_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/status_macros.h"
#include "kernels/train_kernels.h"
#include "train/cpu_math.h"

namespace ndserve::train {
namespace {

enum class BinaryKind { kAdd, kSub, kMul, kDiv };

const char* BinaryName(BinaryKind kind) {
  switch (kind) {
    case BinaryKind::kAdd:
      return "Add";
    case BinaryKind::kSub:
      return "Sub";
    case BinaryKind::kMul:
      return "Mul";
    case BinaryKind::kDiv:
      return "Div";
  }
  return "?";
}

// Offsets of each output element into a and b; empty when that input has the output's
// shape (the flat loop).
struct BinaryPlan {
  Dims out;
  std::vector<std::int64_t> a_off, b_off;
  std::int64_t Ai(std::int64_t e) const { return a_off.empty() ? e : a_off[e]; }
  std::int64_t Bi(std::int64_t e) const { return b_off.empty() ? e : b_off[e]; }
};

absl::StatusOr<BinaryPlan> Plan(const NDArray& a, const NDArray& b) {
  BinaryPlan plan;
  NDS_ASSIGN_OR_RETURN(plan.out, BroadcastShapes(a.shape(), b.shape()));
  const std::int64_t n = NumElements(plan.out);
  if (a.num_elements() != n || a.rank() != static_cast<int>(plan.out.size())) {
    plan.a_off = BroadcastOffsets(a.shape(), plan.out);
  }
  if (b.num_elements() != n || b.rank() != static_cast<int>(plan.out.size())) {
    plan.b_off = BroadcastOffsets(b.shape(), plan.out);
  }
  return plan;
}

// Input i's gradient from a full-size contribution `full` (output's shape).
absl::Status GiveReduced(BackwardContext& ctx, int i, const NDArray& full,
                         absl::Span<const std::int64_t> out_shape) {
  const NDArray& in = ctx.node().inputs[static_cast<std::size_t>(i)].value();
  if (in.num_elements() == full.num_elements()) return ctx.Add(i, full);
  NDS_ASSIGN_OR_RETURN(GradSlot slot, ctx.Slot(i));
  NDS_ASSIGN_OR_RETURN(float* dst, F32(slot.array));
  NDS_ASSIGN_OR_RETURN(float* src, F32(full));
  ReduceToShape(src, out_shape, in.shape(), dst, slot.accumulate);
  return absl::OkStatus();
}

absl::StatusOr<Variable> Binary(BinaryKind kind, NDManager& scope, const Variable& a,
                                const Variable& b) {
  NDS_ASSIGN_OR_RETURN(BinaryPlan plan, Plan(a.value(), b.value()));
  NDS_ASSIGN_OR_RETURN(NDArray out, NewF32(scope, plan.out));
  NDS_ASSIGN_OR_RETURN(const float* pa, F32(a.value()));
  NDS_ASSIGN_OR_RETURN(const float* pb, F32(b.value()));
  NDS_ASSIGN_OR_RETURN(float* po, F32(out));
  const std::int64_t n = out.num_elements();
  const bool flat = plan.a_off.empty() && plan.b_off.empty();
  switch (kind) {
    case BinaryKind::kAdd:
      if (flat) {
        for (std::int64_t e = 0; e < n; ++e) po[e] = pa[e] + pb[e];
      } else {
        for (std::int64_t e = 0; e < n; ++e) po[e] = pa[plan.Ai(e)] + pb[plan.Bi(e)];
      }
      break;
    case BinaryKind::kSub:
      for (std::int64_t e = 0; e < n; ++e) po[e] = pa[plan.Ai(e)] - pb[plan.Bi(e)];
      break;
    case BinaryKind::kMul:
      for (std::int64_t e = 0; e < n; ++e) po[e] = pa[plan.Ai(e)] * pb[plan.Bi(e)];
      break;
    case BinaryKind::kDiv:
      for (std::int64_t e = 0; e < n; ++e) po[e] = pa[plan.Ai(e)] / pb[plan.Bi(e)];
      break;
  }
  auto shared = std::make_shared<BinaryPlan>(std::move(plan));
  auto creator = Record(
      BinaryName(kind), {a, b},
      [kind, shared](BackwardContext& ctx, const NDArray& g) -> absl::Status {
        const BinaryPlan& p = *shared;
        NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
        NDS_ASSIGN_OR_RETURN(const float* pa, F32(ctx.node().inputs[0].value()));
        NDS_ASSIGN_OR_RETURN(const float* pb, F32(ctx.node().inputs[1].value()));
        const std::int64_t n = g.num_elements();
        for (int i = 0; i < 2; ++i) {
          if (!ctx.NeedsGrad(i)) continue;
          if (kind == BinaryKind::kAdd || (kind == BinaryKind::kSub && i == 0)) {
            NDS_RETURN_IF_ERROR(GiveReduced(ctx, i, g, p.out));
            continue;
          }
          NDS_ASSIGN_OR_RETURN(NDArray full, NewF32(ctx.scope(), p.out));
          NDS_ASSIGN_OR_RETURN(float* pf, F32(full));
          if (kind == BinaryKind::kSub) {
            for (std::int64_t e = 0; e < n; ++e) pf[e] = -pg[e];
          } else if (kind == BinaryKind::kMul) {
            for (std::int64_t e = 0; e < n; ++e) {
              pf[e] = pg[e] * (i == 0 ? pb[p.Bi(e)] : pa[p.Ai(e)]);
            }
          } else if (i == 0) {
            for (std::int64_t e = 0; e < n; ++e) pf[e] = pg[e] / pb[p.Bi(e)];
          } else {
            for (std::int64_t e = 0; e < n; ++e) {
              const float bv = pb[p.Bi(e)];
              pf[e] = -pg[e] * pa[p.Ai(e)] / (bv * bv);
            }
          }
          NDS_RETURN_IF_ERROR(GiveReduced(ctx, i, full, p.out));
        }
        return absl::OkStatus();
      });
  return Variable::FromOp(std::move(out), std::move(creator));
}

enum class UnaryKind { kRelu, kSigmoid, kTanh };

absl::StatusOr<Variable> Unary(UnaryKind kind, NDManager& scope, const Variable& x) {
  NDS_ASSIGN_OR_RETURN(NDArray out, NewF32(scope, x.shape()));
  NDS_ASSIGN_OR_RETURN(const float* px, F32(x.value()));
  NDS_ASSIGN_OR_RETURN(float* po, F32(out));
  const std::int64_t n = out.num_elements();
  const char* name = "Relu";
  switch (kind) {
    case UnaryKind::kRelu:
      for (std::int64_t e = 0; e < n; ++e) po[e] = px[e] > 0.0f ? px[e] : 0.0f;
      break;
    case UnaryKind::kSigmoid:
      name = "Sigmoid";
      for (std::int64_t e = 0; e < n; ++e) po[e] = 1.0f / (1.0f + std::exp(-px[e]));
      break;
    case UnaryKind::kTanh:
      name = "Tanh";
      for (std::int64_t e = 0; e < n; ++e) po[e] = std::tanh(px[e]);
      break;
  }
  // Each backward is written in terms of the output, which the node keeps; the loop is
  // the training math table's (kernels/train_kernels.h, docs/design.md §10.2).
  auto creator =
      Record(name, {x}, [kind, out](BackwardContext& ctx, const NDArray& g) -> absl::Status {
        if (g.device().is_cuda()) {
          return absl::UnimplementedError("activation backward on CUDA arrays is not wired yet");
        }
        NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math,
                             kernels::LookupTrainKernels(DeviceKind::kCpu));
        NDS_ASSIGN_OR_RETURN(GradSlot slot, ctx.Slot(0));
        NDS_ASSIGN_OR_RETURN(float* dst, F32(slot.array));
        NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
        NDS_ASSIGN_OR_RETURN(const float* py, F32(out));
        const kernels::ActivationKind activation =
            kind == UnaryKind::kRelu      ? kernels::ActivationKind::kRelu
            : kind == UnaryKind::kSigmoid ? kernels::ActivationKind::kSigmoid
                                          : kernels::ActivationKind::kTanh;
        return math->activation_backward(kernels::KernelContext::Cpu(), activation, py, pg, dst,
                                         g.num_elements(), slot.accumulate);
      });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace

absl::StatusOr<Variable> Add(NDManager& scope, const Variable& a, const Variable& b) {
  return Binary(BinaryKind::kAdd, scope, a, b);
}
absl::StatusOr<Variable> Sub(NDManager& scope, const Variable& a, const Variable& b) {
  return Binary(BinaryKind::kSub, scope, a, b);
}
absl::StatusOr<Variable> Mul(NDManager& scope, const Variable& a, const Variable& b) {
  return Binary(BinaryKind::kMul, scope, a, b);
}
absl::StatusOr<Variable> Div(NDManager& scope, const Variable& a, const Variable& b) {
  return Binary(BinaryKind::kDiv, scope, a, b);
}
absl::StatusOr<Variable> Relu(NDManager& scope, const Variable& x) {
  return Unary(UnaryKind::kRelu, scope, x);
}
absl::StatusOr<Variable> Sigmoid(NDManager& scope, const Variable& x) {
  return Unary(UnaryKind::kSigmoid, scope, x);
}
absl::StatusOr<Variable> Tanh(NDManager& scope, const Variable& x) {
  return Unary(UnaryKind::kTanh, scope, x);
}

}  // namespace ndserve::train
