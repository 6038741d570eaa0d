#ifndef NDSERVE_ENGINE_TRAINING_SESSIONS_H_
#define NDSERVE_ENGINE_TRAINING_SESSIONS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/training_scopes.h"
#include "memory/nd_manager.h"

namespace ndserve::engine {

// One row of TrainingSessions::List.
struct TrainingSessionInfo {
  std::string id;
  std::string model;
  std::int64_t version = 0;
  std::int64_t steps = 0;           // steps completed
  std::uint64_t trainer_bytes = 0;  // what the trainer scope holds now
  absl::Time started;
  absl::Time last_used;
};

// One training session: its trainer scope and when it was last used. Thread-safe.
//
// Closing a session (Abort, Commit, expiry) frees its trainer scope, and with it every
// array a step or an upload may be writing. So the code that writes into the scope holds
// a use of the session (Enter) while it does, and the close refuses new uses, waits for
// the held ones to end and only then closes the scope: a step finishes (or an upload
// lands) before its memory goes, and the next one answers NOT_FOUND.
class TrainingSession : public std::enable_shared_from_this<TrainingSession> {
 public:
  TrainingSession(std::string id, std::string model, std::int64_t version,
                  std::shared_ptr<TrainerScope> trainer, absl::Time now)
      : id_(std::move(id)),
        model_(std::move(model)),
        version_(version),
        trainer_(std::move(trainer)),
        started_(now),
        last_used_(now) {}

  const std::string& id() const { return id_; }
  const std::string& model() const { return model_; }
  std::int64_t version() const { return version_; }
  TrainerScope& trainer() const { return *trainer_; }
  absl::Time last_used() const;
  TrainingSessionInfo Info() const;

  // A use of the trainer scope, released by dropping the pointer (from any thread).
  // NOT_FOUND once the session is closing. A holder must not close the session itself
  // while it holds a use (the close would wait for it).
  absl::StatusOr<std::shared_ptr<void>> Enter();
  // Uses held now; a session in use is not idle.
  int uses() const;

 private:
  friend class TrainingSessions;
  void Touch(absl::Time now);
  // Refuses new uses, waits until none is held, then closes the trainer scope.
  absl::Status CloseWhenUnused();

  const std::string id_;
  const std::string model_;
  const std::int64_t version_;
  const std::shared_ptr<TrainerScope> trainer_;
  const absl::Time started_;
  mutable absl::Mutex mu_;
  absl::Time last_used_ ABSL_GUARDED_BY(mu_);
  int uses_ ABSL_GUARDED_BY(mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
};

// The open training sessions of an engine (docs/design.md §2.1): at most
// max_sessions_per_model per model, each aborted once idle longer than idle_timeout
// (closing its trainer scope, which frees its parameter copies, gradients and
// optimizer state), listable and abortable by id.
//
// Ownership: owns the sessions; Abort, expiry and the destructor close their trainer
// scopes. A caller that got a session (Get) may still hold it after an abort: its
// arrays are then freed and any further step fails with FAILED_PRECONDITION (closed
// manager, or "use of freed memory"), never undefined behaviour. Thread-safe.
class TrainingSessions {
 public:
  struct Options {
    int max_sessions_per_model = 4;
    absl::Duration idle_timeout = absl::Minutes(10);
    // Where "now" comes from: absl::Now by default; tests drive expiry with their own.
    std::function<absl::Time()> clock;
  };

  explicit TrainingSessions(Options options);
  ~TrainingSessions();  // AbortAll()
  TrainingSessions(const TrainingSessions&) = delete;
  TrainingSessions& operator=(const TrainingSessions&) = delete;

  // Opens a session on version `version` of `model` whose parameters `model_manager`
  // holds: a trainer scope under it. RESOURCE_EXHAUSTED naming the model when it has
  // max_sessions_per_model sessions already; TrainerScope::Open's errors.
  absl::StatusOr<std::shared_ptr<TrainingSession>> Start(absl::string_view model,
                                                         std::int64_t version,
                                                         std::shared_ptr<NDManager> model_manager);
  // The session `id`, marked used now. NOT_FOUND (naming it) if there is none, because it
  // never existed, was aborted or expired.
  absl::StatusOr<std::shared_ptr<TrainingSession>> Get(absl::string_view id);
  // Closes the session's trainer scope and forgets it. NOT_FOUND as Get.
  absl::Status Abort(absl::string_view id);
  // Aborts every session idle for longer than the timeout; returns how many. Called by
  // whoever drives expiry (the daemon's timer, tests).
  int ExpireIdle();
  void AbortAll();

  // Every session, by id.
  std::vector<TrainingSessionInfo> List() const;
  int SessionCount(absl::string_view model) const;

 private:
  absl::Time Now() const { return options_.clock ? options_.clock() : absl::Now(); }
  // Closes the scopes outside the lock.
  static void Close(std::vector<std::shared_ptr<TrainingSession>> sessions);

  const Options options_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<TrainingSession>> sessions_ ABSL_GUARDED_BY(mu_);
  std::int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_TRAINING_SESSIONS_H_
