#ifndef NDSERVE_ENGINE_TRAINING_SCOPES_H_
#define NDSERVE_ENGINE_TRAINING_SCOPES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "memory/dtype.h"
#include "memory/nd_array.h"
#include "memory/nd_manager.h"

namespace ndserve::engine {

class TrainingStep;

// The scopes of one training session, after DJL's Trainer and Batch managers
// (docs/design.md §2.1): a trainer-level manager under the model's manager holds what
// lives as long as the session (the parameter copies being trained, their gradients,
// optimizer state), and every step opens a batch-level manager under it that holds
// that step's arrays and is closed when the step ends, so a step can leave nothing
// behind. While a step is open the model and trainer managers are capped: an array
// the step tries to attach to either of them is refused with FAILED_PRECONDITION and
// counted in the memory system's cap violations for that level
// (ndserve_manager_cap_violations_total{level}), instead of growing the session by one
// step's worth each step. The model manager is capped for good (Model::Create does; Open
// makes sure); the trainer manager is capped only from BeginStep to the step's End, so
// that state can be made between steps (parameters at the start, lazily created
// optimizer state).
//
// Ownership: owns the trainer manager (closed by Close or the destructor, which frees
// every array in it and closes an open step's batch manager); the model manager is
// shared, and must stay open as long as the session (closing it closes the trainer
// scope with it). Steps hold the scope alive. Thread-safe; one step at a time.
// The session a trainer-level manager belongs to, read back from the name Open gave it
// ("trainer/<name>"); nullopt for any other name. The admin dumps label a session's
// managers with it (docs/design.md §2.1).
std::optional<std::string> TrainerScopeSession(absl::string_view manager_name);

class TrainerScope : public std::enable_shared_from_this<TrainerScope> {
 private:
  struct PrivateTag {};

 public:
  // Opens "trainer/<name>" under `model_manager`. FAILED_PRECONDITION if that manager is
  // closed; INVALID_ARGUMENT if it is null.
  static absl::StatusOr<std::shared_ptr<TrainerScope>> Open(
      std::shared_ptr<NDManager> model_manager, absl::string_view name);
  TrainerScope(PrivateTag, std::shared_ptr<NDManager> model_manager,
               std::shared_ptr<NDManager> manager);
  ~TrainerScope();
  TrainerScope(const TrainerScope&) = delete;
  TrainerScope& operator=(const TrainerScope&) = delete;

  // A copy of `source` (same device, any manager) held by the trainer scope: a parameter
  // being trained. FAILED_PRECONDITION during a step or after Close.
  absl::StatusOr<NDArray> CopyOf(const NDArray& source, absl::string_view name = {});
  // Zero-filled arrays held by the trainer scope (gradients, optimizer state); refused
  // during a step like CopyOf.
  absl::StatusOr<NDArray> Zeros(absl::Span<const std::int64_t> shape, DType dtype,
                                absl::string_view name = {});

  // Opens the next step: caps the model and trainer managers and opens the step's batch
  // manager. FAILED_PRECONDITION while another step is open or after Close.
  absl::StatusOr<TrainingStep> BeginStep();

  // Closes the trainer manager, and an open step's batch manager with it: every byte of
  // the session goes back to the pool. Idempotent.
  absl::Status Close();

  const std::shared_ptr<NDManager>& manager() const { return manager_; }
  const std::shared_ptr<NDManager>& model_manager() const { return model_manager_; }
  std::int64_t steps_completed() const;
  bool in_step() const;

 private:
  friend class TrainingStep;
  // From TrainingStep::End: lifts the trainer's cap (the model's stays).
  void EndStep();

  const std::shared_ptr<NDManager> model_manager_;
  const std::shared_ptr<NDManager> manager_;
  mutable absl::Mutex mu_;
  bool in_step_ ABSL_GUARDED_BY(mu_) = false;
  std::int64_t steps_completed_ ABSL_GUARDED_BY(mu_) = 0;
};

// One step of a TrainerScope: holds the step's batch manager, in which the step makes
// every array it needs (activations, per-step gradients before they are accumulated
// into the trainer's, the loss). End (or the destructor) closes it, frees those arrays
// and lifts the trainer's cap. Move-only; one owner (not thread-safe itself; the
// managers are).
class TrainingStep {
 public:
  // An ended step (no batch manager): what a moved-from step is.
  TrainingStep() = default;
  TrainingStep(TrainingStep&& other) noexcept = default;
  TrainingStep& operator=(TrainingStep&& other) noexcept {
    if (this != &other) {
      End().IgnoreError();
      trainer_ = std::move(other.trainer_);
      batch_ = std::move(other.batch_);
      index_ = other.index_;
    }
    return *this;
  }
  TrainingStep(const TrainingStep&) = delete;
  TrainingStep& operator=(const TrainingStep&) = delete;
  ~TrainingStep() { End().IgnoreError(); }

  // The step's batch manager ("batch/<trainer>/<index>"); null after End.
  const std::shared_ptr<NDManager>& batch() const { return batch_; }
  // 0 for the session's first step.
  std::int64_t index() const { return index_; }
  // Closes the batch manager and ends the step. Idempotent.
  absl::Status End();

 private:
  friend class TrainerScope;
  TrainingStep(std::shared_ptr<TrainerScope> trainer, std::shared_ptr<NDManager> batch,
               std::int64_t index)
      : trainer_(std::move(trainer)), batch_(std::move(batch)), index_(index) {}

  std::shared_ptr<TrainerScope> trainer_;
  std::shared_ptr<NDManager> batch_;
  std::int64_t index_ = 0;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_TRAINING_SCOPES_H_
