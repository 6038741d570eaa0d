#ifndef NDSERVE_TRAIN_TRAINING_RUNS_H_
#define NDSERVE_TRAIN_TRAINING_RUNS_H_

// The engine's training sessions with what each one trains (docs/design.md §10.1): the
// Trainer service's core. TrainingSessions keeps the scopes, the bound per model and the
// idle expiry; this pairs each session with its TrainingRun and publishes a run's
// parameters as the model's next version on Commit.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/batch_iterator.h"
#include "engine/engine.h"
#include "engine/host_tensor.h"
#include "engine/training_sessions.h"
#include "train/training_run.h"

namespace ndserve::train {

struct StartedSession {
  std::string id;
  std::string model;
  std::int64_t version = 0;  // the version trained (resolved from 0: highest)
  std::vector<std::string> parameters;  // the trained initializers
};

struct CommitResult {
  std::int64_t version = 0;  // the published version
  std::int64_t steps = 0;    // steps the session ran
};

// Ownership: borrows the engine (it must outlive this); owns the sessions and runs.
// Abort, Commit, expiry and the destructor free a session's memory. Thread-safe; one
// step at a time per session (a second concurrent Step fails FAILED_PRECONDITION).
class TrainingRuns {
 public:
  TrainingRuns(engine::Engine* engine, engine::TrainingSessions::Options options);
  ~TrainingRuns();

  // Opens a session on `version` (0: the highest loaded) of `model`. NOT_FOUND for a
  // model or version that is not loaded; RESOURCE_EXHAUSTED when the model has its
  // maximum of sessions; TrainingRun::Create's errors (the session is not kept then).
  absl::StatusOr<StartedSession> Start(absl::string_view model, std::int64_t version,
                                       TrainingRunOptions options);
  // One step of session `id`. NOT_FOUND for an unknown (aborted, expired) session.
  absl::StatusOr<StepResult> Step(absl::string_view id, absl::Span<const engine::HostTensor> inputs,
                                  const engine::HostTensor& labels);
  // Steps session `id` on every batch of `source` (a Train stream), uploaded by an eager
  // BatchIterator under the session's trainer scope (docs/design.md §2.1): batch k is
  // freed as soon as step k is done and at most two batches are held, however long the
  // stream. A host batch is the inputs by name and, last, the labels; `ready` is the
  // iterator's read-ahead rule. Calls `sink` with each step's result; a false return
  // stops the stream (the client went away). Returns the first error: NOT_FOUND as
  // Step, the source's and the steps' errors (the session stays open).
  absl::Status Stream(absl::string_view id, engine::BatchIterator::Source source,
                      engine::BatchIterator::Ready ready,
                      absl::FunctionRef<bool(const StepResult&)> sink);
  // As Stream, but a reader thread pulls `source` (which may block until the client
  // sends) and uploads batch k+1 while step k runs (BatchIterator::CreateReadAhead).
  // However the stream ends, the reader is stopped and joined before this returns:
  // `interrupt` gets the status the stream ends with if the reader waits in `source`.
  absl::Status StreamReadingAhead(absl::string_view id, engine::BatchIterator::Source source,
                                  engine::BatchIterator::Interrupt interrupt,
                                  absl::FunctionRef<bool(const StepResult&)> sink);
  // Publishes the session's parameters as the model's next version
  // (Engine::PublishVersion: requests in flight finish on the old version) and ends the
  // session. On failure the session stays open. NOT_FOUND as Step; FAILED_PRECONDITION
  // while another Commit of it is publishing (Step too).
  absl::StatusOr<CommitResult> Commit(absl::string_view id);
  absl::Status Abort(absl::string_view id);
  std::vector<engine::TrainingSessionInfo> List() const;
  // Aborts sessions idle past the timeout (the daemon's timer); returns how many.
  int ExpireIdle();
  // The model session `id` trains, or NOT_FOUND (metric labels).
  absl::StatusOr<std::string> ModelOf(absl::string_view id) const;

 private:
  struct Entry {
    std::shared_ptr<engine::TrainingSession> session;
    absl::Mutex mu;  // Step against Commit's read of the parameters
    std::unique_ptr<TrainingRun> run ABSL_GUARDED_BY(mu);
    // A Commit copied the parameters and is publishing them: further steps would be
    // lost and a second Commit would publish twice.
    bool committing ABSL_GUARDED_BY(mu) = false;
  };
  // The entry of a live session (marking it used), dropping a stale one.
  absl::StatusOr<std::shared_ptr<Entry>> Find(absl::string_view id);
  // Steps session `id` on `batches` until they end, a step fails or `sink` says stop.
  absl::Status RunStream(absl::string_view id, engine::BatchIterator& batches,
                         absl::FunctionRef<bool(const StepResult&)> sink);
  void Prune();

  engine::Engine* const engine_;
  engine::TrainingSessions sessions_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>, std::less<>> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_TRAINING_RUNS_H_
