#ifndef NDSERVE_TRAIN_OPTIMIZER_H_
#define NDSERVE_TRAIN_OPTIMIZER_H_

// Optimizers with PyTorch's update rules (torch.optim.SGD and Adam, L2 weight decay
// added to the gradient). Their state (momentum buffers, moments) is made once in the
// trainer manager when the optimizer is built and updated in place every step.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Updates every parameter from its gradient (call after Backward, before ClearGrad).
  virtual absl::Status Step() = 0;
  absl::Span<const Variable> parameters() const { return parameters_; }

 protected:
  explicit Optimizer(std::vector<Variable> parameters) : parameters_(std::move(parameters)) {}
  std::vector<Variable> parameters_;
};

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

class Sgd final : public Optimizer {
 public:
  // INVALID_ARGUMENT for lr <= 0, negative momentum or decay, nesterov without momentum.
  static absl::StatusOr<std::unique_ptr<Sgd>> Create(std::vector<Variable> parameters,
                                                     const SgdOptions& options, NDManager& trainer);
  absl::Status Step() override;

 private:
  Sgd(std::vector<Variable> parameters, const SgdOptions& options)
      : Optimizer(std::move(parameters)), options_(options) {}
  SgdOptions options_;
  std::vector<NDArray> momentum_;  // parallel to parameters_ when momentum > 0
  std::int64_t steps_ = 0;
};

struct AdamOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weight_decay = 0.0f;
};

class Adam final : public Optimizer {
 public:
  static absl::StatusOr<std::unique_ptr<Adam>> Create(std::vector<Variable> parameters,
                                                      const AdamOptions& options, NDManager& trainer);
  absl::Status Step() override;

 private:
  Adam(std::vector<Variable> parameters, const AdamOptions& options)
      : Optimizer(std::move(parameters)), options_(options) {}
  AdamOptions options_;
  std::vector<NDArray> m_, v_;
  std::int64_t steps_ = 0;
};

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_OPTIMIZER_H_
