#include "train/elementwise_ops.h"

#include <vector>

#include "base/status_macros.h"
#include "kernels/train_kernels.h"
#include "train/compute.h"
#include "train/array_helpers.h"

namespace ndserve::train {
namespace {

using kernels::OpKind;

// Input i's gradient from a contribution `full` of the output's shape: handed over as it
// is when the input has that many elements, else summed down to the input's shape
// (a broadcast operand), scaled by `alpha`.
absl::Status GiveReduced(BackwardContext& ctx, int i, const NDArray& full, float alpha) {
  const NDArray& in = ctx.node().inputs[static_cast<std::size_t>(i)].value();
  if (alpha == 1.0f && in.num_elements() == full.num_elements()) return ctx.Add(i, full);
  NDS_ASSIGN_OR_RETURN(GradSlot slot, ctx.Slot(i));
  return AddReduced(ctx.scope(), alpha, full, in.shape(), slot.array, slot.accumulate);
}

// The forward kernels of kernels/dispatch.h broadcast both operands; the backward is
// written with the same kernels (products and quotients of the output gradient), so
// it runs wherever the step runs.
absl::StatusOr<Variable> Binary(OpKind op, const char* name, NDManager& scope, const Variable& a,
                                const Variable& b) {
  NDS_ASSIGN_OR_RETURN(NDArray out, RunOp(scope, op, {View(a.value()), View(b.value())}));
  auto creator = Record(name, {a, b}, [op, out](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    const NDArray& a = ctx.node().inputs[0].value();
    const NDArray& b = ctx.node().inputs[1].value();
    for (int i = 0; i < 2; ++i) {
      if (!ctx.NeedsGrad(i)) continue;
      NDManager& scope = ctx.scope();
      switch (op) {
        case OpKind::kAdd:
          NDS_RETURN_IF_ERROR(GiveReduced(ctx, i, g, 1.0f));
          break;
        case OpKind::kSub:
          NDS_RETURN_IF_ERROR(GiveReduced(ctx, i, g, i == 0 ? 1.0f : -1.0f));
          break;
        case OpKind::kMul: {
          NDS_ASSIGN_OR_RETURN(NDArray full,
                               RunOp(scope, OpKind::kMul, {View(g), View(i == 0 ? b : a)}));
          NDS_RETURN_IF_ERROR(GiveReduced(ctx, i, full, 1.0f));
          break;
        }
        case OpKind::kDiv: {
          // d/da = g / b; d/db = -g a / b^2 = -(g (a / b)) / b, from the kept output.
          NDS_ASSIGN_OR_RETURN(NDArray full, RunOp(scope, OpKind::kDiv, {View(g), View(b)}));
          if (i == 1) {
            NDS_ASSIGN_OR_RETURN(full, RunOp(scope, OpKind::kMul, {View(full), View(out)}));
          }
          NDS_RETURN_IF_ERROR(GiveReduced(ctx, i, full, i == 0 ? 1.0f : -1.0f));
          break;
        }
        default:
          return absl::InternalError("not a binary op");
      }
    }
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

absl::StatusOr<Variable> Unary(OpKind op, const char* name, kernels::ActivationKind kind,
                               NDManager& scope, const Variable& x) {
  NDS_ASSIGN_OR_RETURN(NDArray out, RunOp(scope, op, {View(x.value())}));
  // Each backward is written in terms of the output, which the node keeps.
  auto creator =
      Record(name, {x}, [kind, out](BackwardContext& ctx, const NDArray& g) -> absl::Status {
        NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&g, &out}));
        NDS_ASSIGN_OR_RETURN(GradSlot slot, ctx.Slot(0));
        NDS_ASSIGN_OR_RETURN(float* dst, F32(slot.array));
        NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
        NDS_ASSIGN_OR_RETURN(const float* py, F32(out));
        return math->activation_backward(CurrentContext(), kind, py, pg, dst, g.num_elements(),
                                         slot.accumulate);
      });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace

absl::StatusOr<Variable> Add(NDManager& scope, const Variable& a, const Variable& b) {
  return Binary(OpKind::kAdd, "Add", scope, a, b);
}
absl::StatusOr<Variable> Sub(NDManager& scope, const Variable& a, const Variable& b) {
  return Binary(OpKind::kSub, "Sub", scope, a, b);
}
absl::StatusOr<Variable> Mul(NDManager& scope, const Variable& a, const Variable& b) {
  return Binary(OpKind::kMul, "Mul", scope, a, b);
}
absl::StatusOr<Variable> Div(NDManager& scope, const Variable& a, const Variable& b) {
  return Binary(OpKind::kDiv, "Div", scope, a, b);
}
absl::StatusOr<Variable> Relu(NDManager& scope, const Variable& x) {
  return Unary(OpKind::kRelu, "Relu", kernels::ActivationKind::kRelu, scope, x);
}
absl::StatusOr<Variable> Sigmoid(NDManager& scope, const Variable& x) {
  return Unary(OpKind::kSigmoid, "Sigmoid", kernels::ActivationKind::kSigmoid, scope, x);
}
absl::StatusOr<Variable> Tanh(NDManager& scope, const Variable& x) {
  return Unary(OpKind::kTanh, "Tanh", kernels::ActivationKind::kTanh, scope, x);
}

}  // namespace ndserve::train
