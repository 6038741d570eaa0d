#include "train/training_runs.h"

#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace ndserve::train {
namespace {

// The iterator's uploads write into batch scopes under the trainer scope: each holds a
// use of the session, so an Abort waits for an upload in progress.
engine::BatchIterator::Guard UseOf(std::shared_ptr<engine::TrainingSession> session) {
  return [session = std::move(session)] { return session->Enter(); };
}

}  // namespace

TrainingRuns::TrainingRuns(engine::Engine* engine, engine::TrainingSessions::Options options)
    : engine_(engine), sessions_(std::move(options)) {}

TrainingRuns::~TrainingRuns() {
  sessions_.AbortAll();
  absl::MutexLock lock(&mu_);
  entries_.clear();
}

absl::StatusOr<StartedSession> TrainingRuns::Start(absl::string_view model,
                                                    std::int64_t version,
                                                    TrainingRunOptions options) {
  if (model.empty()) return absl::InvalidArgumentError("StartSession needs a model name");
  if (version < 0) {
    return absl::InvalidArgumentError(absl::StrCat("version ", version, " is negative"));
  }
  NDS_ASSIGN_OR_RETURN(std::shared_ptr<engine::ServedModel> served,
                       engine_->GetModel(model, version));
  NDS_ASSIGN_OR_RETURN(std::shared_ptr<engine::TrainingSession> session,
                       sessions_.Start(model, served->version(), served->model().manager()));
  const std::string path = served->model_path();
  // The session's scope holds the model manager, not the served version: dropping this
  // reference lets a later Commit retire the version.
  served.reset();
  std::shared_ptr<engine::TrainerScope> scope(session, &session->trainer());
  absl::StatusOr<std::shared_ptr<void>> use = session->Enter();
  if (!use.ok()) return use.status();  // aborted while it opened
  absl::StatusOr<std::unique_ptr<TrainingRun>> run =
      TrainingRun::Create(path, std::move(scope), std::move(options));
  use->reset();  // before an Abort of its own, which would wait for it
  if (!run.ok()) {
    sessions_.Abort(session->id()).IgnoreError();
    return run.status();
  }
  StartedSession started;
  started.id = session->id();
  started.model = std::string(model);
  started.version = session->version();
  NDS_ASSIGN_OR_RETURN(std::vector<engine::HostTensor> values, (*run)->Parameters());
  for (const engine::HostTensor& t : values) started.parameters.push_back(t.name);
  auto entry = std::make_shared<Entry>();
  entry->session = std::move(session);
  {
    absl::MutexLock run_lock(&entry->mu);
    entry->run = *std::move(run);
  }
  absl::MutexLock lock(&mu_);
  entries_[started.id] = std::move(entry);
  return started;
}

absl::StatusOr<std::shared_ptr<TrainingRuns::Entry>> TrainingRuns::Find(absl::string_view id) {
  absl::StatusOr<std::shared_ptr<engine::TrainingSession>> session = sessions_.Get(id);
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (!session.ok()) {
    if (it != entries_.end()) entries_.erase(it);
    return session.status();
  }
  if (it == entries_.end()) {
    // Started but its run is still being built (or failed): not a session yet.
    return absl::NotFoundError(absl::StrCat("no training session '", id, "'"));
  }
  return it->second;
}

absl::StatusOr<StepResult> TrainingRuns::Step(absl::string_view id,
                                              absl::Span<const engine::HostTensor> inputs,
                                              const engine::HostTensor& labels) {
  NDS_ASSIGN_OR_RETURN(std::shared_ptr<Entry> entry, Find(id));
  // Held for the step: an Abort or expiry meanwhile waits for it (training_sessions.h).
  NDS_ASSIGN_OR_RETURN(std::shared_ptr<void> use, entry->session->Enter());
  absl::MutexLock lock(&entry->mu);
  if (entry->committing) {
    return absl::FailedPreconditionError(absl::StrCat("training session '", id, "' is being committed"));
  }
  return entry->run->Step(inputs, labels);
}

absl::Status TrainingRuns::Stream(absl::string_view id, engine::BatchIterator::Source source,
                                  engine::BatchIterator::Ready ready,
                                  absl::FunctionRef<bool(const StepResult&)> sink) {
  NDS_ASSIGN_OR_RETURN(std::shared_ptr<Entry> entry, Find(id));
  NDS_ASSIGN_OR_RETURN(std::unique_ptr<engine::BatchIterator> batches,
                       engine::BatchIterator::Create(entry->session->trainer().manager(),
                                                     std::move(source), std::move(ready),
                                                     UseOf(entry->session)));
  return RunStream(id, *batches, sink);
}

absl::Status TrainingRuns::StreamReadingAhead(absl::string_view id,
                                              engine::BatchIterator::Source source,
                                              engine::BatchIterator::Interrupt interrupt,
                                              absl::FunctionRef<bool(const StepResult&)> sink) {
  NDS_ASSIGN_OR_RETURN(std::shared_ptr<Entry> entry, Find(id));
  NDS_ASSIGN_OR_RETURN(
      std::unique_ptr<engine::BatchIterator> batches,
      engine::BatchIterator::CreateReadAhead(entry->session->trainer().manager(), std::move(source),
                                             std::move(interrupt), UseOf(entry->session)));
  entry.reset();
  absl::Status status = RunStream(id, *batches, sink);
  // The reader must not outlive the stream it reads (a gRPC call ends with this).
  batches->Stop(status);
  return status;
}

absl::Status TrainingRuns::RunStream(absl::string_view id, engine::BatchIterator& batches,
                                     absl::FunctionRef<bool(const StepResult&)> sink) {
  for (;;) {
    absl::StatusOr<const engine::DeviceBatch*> next = batches.Next();
    if (!next.ok()) {
      // An Abort or expiry closes the trainer scope under the iterator: say so, not that
      // its scope is closed.
      if (absl::StatusOr<std::shared_ptr<Entry>> gone = Find(id); !gone.ok()) return gone.status();
      return next.status();
    }
    const engine::DeviceBatch* batch = *next;
    if (batch == nullptr) return absl::OkStatus();
    const absl::Time begun = absl::Now();
    // Found again per step: an Abort or expiry meanwhile ends the stream with NOT_FOUND.
    NDS_ASSIGN_OR_RETURN(std::shared_ptr<Entry> entry, Find(id));
    StepResult result;
    {
      NDS_ASSIGN_OR_RETURN(std::shared_ptr<void> use, entry->session->Enter());
      absl::MutexLock lock(&entry->mu);
      if (entry->committing) {
        return absl::FailedPreconditionError(
            absl::StrCat("training session '", id, "' is being committed"));
      }
      NDS_ASSIGN_OR_RETURN(result, entry->run->Step(*batch));
    }
    result.batches_held = batches.live_batches();
    result.duration = absl::Now() - begun;
    if (!sink(result)) return absl::OkStatus();
  }
}

absl::StatusOr<CommitResult> TrainingRuns::Commit(absl::string_view id) {
  NDS_ASSIGN_OR_RETURN(std::shared_ptr<Entry> entry, Find(id));
  std::vector<engine::HostTensor> values;
  CommitResult result;
  {
    NDS_ASSIGN_OR_RETURN(std::shared_ptr<void> use, entry->session->Enter());
    absl::MutexLock lock(&entry->mu);
    if (entry->committing) {
      return absl::FailedPreconditionError(
          absl::StrCat("training session '", id, "' is being committed"));
    }
    NDS_ASSIGN_OR_RETURN(values, entry->run->Parameters());
    result.steps = entry->run->steps();
    entry->committing = true;
  }
  absl::StatusOr<std::int64_t> published =
      engine_->PublishVersion(entry->session->model(), values);
  if (!published.ok()) {
    absl::MutexLock lock(&entry->mu);
    entry->committing = false;
    return published.status();
  }
  result.version = *published;
  // The trained copies are in the new version now; the session's memory goes back. (A
  // retired version has closed the scope already; the session is forgotten either way.)
  sessions_.Abort(id).IgnoreError();
  absl::MutexLock lock(&mu_);
  entries_.erase(std::string(id));
  return result;
}

absl::Status TrainingRuns::Abort(absl::string_view id) {
  NDS_RETURN_IF_ERROR(sessions_.Abort(id));
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it != entries_.end()) entries_.erase(it);
  return absl::OkStatus();
}

std::vector<engine::TrainingSessionInfo> TrainingRuns::List() const { return sessions_.List(); }

int TrainingRuns::ExpireIdle() {
  const int expired = sessions_.ExpireIdle();
  if (expired > 0) Prune();
  return expired;
}

void TrainingRuns::Prune() {
  // Expiry closed those sessions' trainer managers; a session started meanwhile is open.
  absl::MutexLock lock(&mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->second->session->trainer().manager()->closed() ? entries_.erase(it) : std::next(it);
  }
}

absl::StatusOr<std::string> TrainingRuns::ModelOf(absl::string_view id) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return absl::NotFoundError(absl::StrCat("no training session '", id, "'"));
  return it->second->session->model();
}

}  // namespace ndserve::train
