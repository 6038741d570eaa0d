#include "engine/training_scopes.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace ndserve::engine {
namespace {

constexpr absl::string_view kTrainerPrefix = "trainer/";

absl::Status RefusedDuringStep(absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot ", what,
                   " in the trainer scope during a step: a step's arrays belong to its batch "
                   "scope; make session state between steps"));
}

}  // namespace

std::optional<std::string> TrainerScopeSession(absl::string_view manager_name) {
  if (!absl::ConsumePrefix(&manager_name, kTrainerPrefix) || manager_name.empty()) {
    return std::nullopt;
  }
  return std::string(manager_name);
}

absl::StatusOr<std::shared_ptr<TrainerScope>> TrainerScope::Open(
    std::shared_ptr<NDManager> model_manager, absl::string_view name) {
  if (model_manager == nullptr) {
    return absl::InvalidArgumentError("a trainer scope needs the model's manager");
  }
  NDS_ASSIGN_OR_RETURN(
      std::shared_ptr<NDManager> manager,
      model_manager->NewSubManager(ManagerLevel::kTrainer, absl::StrCat(kTrainerPrefix, name)));
  // The served model's manager is capped already; a bare one (tests, tools) is capped
  // here so that the rule holds however the model was made.
  model_manager->Cap();
  return std::make_shared<TrainerScope>(PrivateTag{}, std::move(model_manager), std::move(manager));
}

TrainerScope::TrainerScope(PrivateTag, std::shared_ptr<NDManager> model_manager,
                           std::shared_ptr<NDManager> manager)
    : model_manager_(std::move(model_manager)), manager_(std::move(manager)) {}

TrainerScope::~TrainerScope() { Close().IgnoreError(); }

absl::StatusOr<NDArray> TrainerScope::CopyOf(const NDArray& source, absl::string_view name) {
  if (in_step()) return RefusedDuringStep("copy a parameter");
  if (source.device() != manager_->device()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot copy '", source.name(), "' from ",
                                                   source.device().ToString(),
                                                   " into a trainer "
                                                   "scope on ",
                                                   manager_->device().ToString()));
  }
  // Once per parameter and session, so a trip through host memory costs nothing that
  // matters and works on every device.
  NDS_ASSIGN_OR_RETURN(std::vector<std::uint8_t> bytes, source.ToHost());
  return manager_->FromHost(source.shape(), source.dtype(), bytes,
                            name.empty() ? source.name() : std::string(name));
}

absl::StatusOr<NDArray> TrainerScope::Zeros(absl::Span<const std::int64_t> shape, DType dtype,
                                            absl::string_view name) {
  if (in_step()) return RefusedDuringStep("make an array");
  return manager_->Zeros(shape, dtype, name);
}

absl::StatusOr<TrainingStep> TrainerScope::BeginStep() {
  std::int64_t index = 0;
  {
    absl::MutexLock lock(&mu_);
    if (in_step_) {
      return absl::FailedPreconditionError(
          absl::StrCat(manager_->name(), " already has a step open; end it first"));
    }
    if (manager_->closed()) {
      return absl::FailedPreconditionError(absl::StrCat(manager_->name(), " is closed"));
    }
    in_step_ = true;
    index = steps_completed_;
  }
  model_manager_->Cap();
  manager_->Cap();
  absl::StatusOr<std::shared_ptr<NDManager>> batch = manager_->NewSubManager(
      ManagerLevel::kBatch, absl::StrCat("batch/", manager_->name(), "/", index));
  if (!batch.ok()) {
    EndStep();
    return batch.status();
  }
  return TrainingStep(shared_from_this(), *std::move(batch), index);
}

void TrainerScope::EndStep() {
  absl::MutexLock lock(&mu_);
  if (!in_step_) return;
  in_step_ = false;
  ++steps_completed_;
  manager_->Uncap();
}

absl::Status TrainerScope::Close() { return manager_->Close(); }

std::int64_t TrainerScope::steps_completed() const {
  absl::MutexLock lock(&mu_);
  return steps_completed_;
}

bool TrainerScope::in_step() const {
  absl::MutexLock lock(&mu_);
  return in_step_;
}

absl::Status TrainingStep::End() {
  if (batch_ == nullptr) return absl::OkStatus();
  absl::Status status = batch_->Close();
  batch_.reset();
  trainer_->EndStep();
  trainer_.reset();
  return status;
}

}  // namespace ndserve::engine
