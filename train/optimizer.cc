#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/train_kernels.h"
#include "train/array_helpers.h"
#include "train/compute.h"

namespace ndserve::train {
namespace {

absl::Status CheckParameters(absl::Span<const Variable> parameters) {
  for (const Variable& p : parameters) {
    if (p.is_null() || p.grad().is_null()) {
      return absl::InvalidArgumentError("optimizer given a variable that is not a parameter");
    }
  }
  return absl::OkStatus();
}


}  // namespace

absl::StatusOr<std::unique_ptr<Sgd>> Sgd::Create(std::vector<Variable> parameters,
                                                 const SgdOptions& o, NDManager& trainer) {
  if (!(o.lr > 0.0f) || o.momentum < 0.0f || o.weight_decay < 0.0f ||
      (o.nesterov && o.momentum == 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SGD wants lr > 0, momentum >= 0, weight_decay >= 0 and nesterov only with momentum; got lr=",
        o.lr, " momentum=", o.momentum, " weight_decay=", o.weight_decay));
  }
  NDS_RETURN_IF_ERROR(CheckParameters(parameters));
  std::unique_ptr<Sgd> sgd(new Sgd(std::move(parameters), o));
  if (o.momentum > 0.0f) {
    for (const Variable& p : sgd->parameters_) {
      NDS_ASSIGN_OR_RETURN(NDArray buf, ZerosF32(trainer, p.shape()));
      sgd->momentum_.push_back(std::move(buf));
    }
  }
  return sgd;
}

absl::Status Sgd::Step() {
  const SgdOptions& o = options_;
  // The updates are the training math table's (kernels/train_kernels.h) on the step's
  // device (train/compute.h).
  const kernels::KernelContext& ctx = CurrentContext();
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    VariableState& s = *parameters_[i].state();
    NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&s.value, &s.grad}));
    NDS_ASSIGN_OR_RETURN(float* w, F32(s.value));
    NDS_ASSIGN_OR_RETURN(const float* g, F32(s.grad));
    const std::int64_t n = s.value.num_elements();
    kernels::SgdStep step;
    step.lr = o.lr;
    step.momentum = o.momentum;
    step.weight_decay = o.weight_decay;
    step.nesterov = o.nesterov;
    step.first_step = steps_ == 0;
    if (o.momentum == 0.0f && o.weight_decay == 0.0f && !s.dense_grad) {
      // Plain SGD moves only the rows that got a gradient (embedding tables; rows are
      // recorded only for ids on the host, train/variable.h), in one call.
      const std::vector<std::int64_t>& rows = DistinctTouchedRows(s);
      NDS_RETURN_IF_ERROR(math->sgd_update_rows(ctx, step, w, g, rows.data(),
                                                static_cast<std::int64_t>(rows.size()),
                                                RowWidth(s.value)));
      continue;
    }
    float* buf = nullptr;
    if (o.momentum > 0.0f) {
      NDS_ASSIGN_OR_RETURN(buf, F32(momentum_[i]));
    }
    NDS_RETURN_IF_ERROR(math->sgd_update(ctx, step, w, g, buf, n));
  }
  ++steps_;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Adam>> Adam::Create(std::vector<Variable> parameters,
                                                   const AdamOptions& o, NDManager& trainer) {
  if (!(o.lr > 0.0f) || o.beta1 < 0.0f || o.beta1 >= 1.0f || o.beta2 < 0.0f || o.beta2 >= 1.0f ||
      !(o.epsilon > 0.0f) || o.weight_decay < 0.0f) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Adam wants lr > 0, betas in [0, 1), epsilon > 0, weight_decay >= 0; got lr=", o.lr,
        " beta1=", o.beta1, " beta2=", o.beta2, " epsilon=", o.epsilon));
  }
  NDS_RETURN_IF_ERROR(CheckParameters(parameters));
  std::unique_ptr<Adam> adam(new Adam(std::move(parameters), o));
  for (const Variable& p : adam->parameters_) {
    NDS_ASSIGN_OR_RETURN(NDArray m, ZerosF32(trainer, p.shape()));
    NDS_ASSIGN_OR_RETURN(NDArray v, ZerosF32(trainer, p.shape()));
    adam->m_.push_back(std::move(m));
    adam->v_.push_back(std::move(v));
  }
  return adam;
}

absl::Status Adam::Step() {
  const AdamOptions& o = options_;
  ++steps_;
  const double c1 = 1.0 - std::pow(static_cast<double>(o.beta1), static_cast<double>(steps_));
  const double c2 = 1.0 - std::pow(static_cast<double>(o.beta2), static_cast<double>(steps_));
  kernels::AdamStep step;
  step.step_size = static_cast<float>(o.lr / c1);
  step.sqrt_c2 = static_cast<float>(std::sqrt(c2));
  step.beta1 = o.beta1;
  step.beta2 = o.beta2;
  step.epsilon = o.epsilon;
  step.weight_decay = o.weight_decay;
  // The updates are the training math table's (kernels/train_kernels.h) on the step's
  // device (train/compute.h).
  const kernels::KernelContext& ctx = CurrentContext();
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    VariableState& s = *parameters_[i].state();
    NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&s.value, &s.grad}));
    NDS_ASSIGN_OR_RETURN(float* w, F32(s.value));
    NDS_ASSIGN_OR_RETURN(const float* g, F32(s.grad));
    NDS_ASSIGN_OR_RETURN(float* m, F32(m_[i]));
    NDS_ASSIGN_OR_RETURN(float* v, F32(v_[i]));
    NDS_RETURN_IF_ERROR(math->adam_update(ctx, step, w, g, m, v, s.value.num_elements()));
  }
  return absl::OkStatus();
}

}  // namespace ndserve::train
