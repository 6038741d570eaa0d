#include "engine/training_sessions.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace ndserve::engine {

absl::Time TrainingSession::last_used() const {
  absl::MutexLock lock(&mu_);
  return last_used_;
}

void TrainingSession::Touch(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (now > last_used_) last_used_ = now;
}

absl::StatusOr<std::shared_ptr<void>> TrainingSession::Enter() {
  {
    absl::MutexLock lock(&mu_);
    if (closing_) {
      return absl::NotFoundError(
          absl::StrCat("training session '", id_, "' is being aborted or has expired"));
    }
    ++uses_;
  }
  // The release keeps the session alive: a use may outlive every other reference.
  std::shared_ptr<TrainingSession> self = shared_from_this();
  return std::shared_ptr<void>(self.get(), [self](void*) {
    absl::MutexLock lock(&self->mu_);
    --self->uses_;
  });
}

int TrainingSession::uses() const {
  absl::MutexLock lock(&mu_);
  return uses_;
}

absl::Status TrainingSession::CloseWhenUnused() {
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    mu_.Await(absl::Condition(
        +[](int* uses) { return *uses == 0; }, &uses_));
  }
  return trainer_->Close();
}

TrainingSessionInfo TrainingSession::Info() const {
  TrainingSessionInfo info;
  info.id = id_;
  info.model = model_;
  info.version = version_;
  info.steps = trainer_->steps_completed();
  info.trainer_bytes = trainer_->manager()->bytes();
  info.started = started_;
  info.last_used = last_used();
  return info;
}

TrainingSessions::TrainingSessions(Options options) : options_(std::move(options)) {}

TrainingSessions::~TrainingSessions() { AbortAll(); }

void TrainingSessions::Close(std::vector<std::shared_ptr<TrainingSession>> sessions) {
  for (const std::shared_ptr<TrainingSession>& s : sessions) s->CloseWhenUnused().IgnoreError();
}

absl::StatusOr<std::shared_ptr<TrainingSession>> TrainingSessions::Start(
    absl::string_view model, std::int64_t version, std::shared_ptr<NDManager> model_manager) {
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    int open = 0;
    for (const auto& [sid, s] : sessions_) open += s->model() == model;
    if (open >= options_.max_sessions_per_model) {
      return absl::ResourceExhaustedError(absl::StrCat("model '", model, "' has ", open,
                                                       " training sessions open, the most it may "
                                                       "have; commit or abort one first"));
    }
    id = absl::StrCat(model, "/", next_id_++);
  }
  NDS_ASSIGN_OR_RETURN(std::shared_ptr<TrainerScope> trainer,
                       TrainerScope::Open(std::move(model_manager), id));
  auto session =
      std::make_shared<TrainingSession>(id, std::string(model), version, std::move(trainer), Now());
  absl::MutexLock lock(&mu_);
  // Counted again: another Start may have taken the last place while this one opened
  // its scope.
  int open = 0;
  for (const auto& [sid, s] : sessions_) open += s->model() == model;
  if (open >= options_.max_sessions_per_model) {
    session->trainer().Close().IgnoreError();
    return absl::ResourceExhaustedError(absl::StrCat(
        "model '", model, "' has ", open, " training sessions open, the most it may have"));
  }
  sessions_.emplace(id, session);
  return session;
}

absl::StatusOr<std::shared_ptr<TrainingSession>> TrainingSessions::Get(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(std::string(id));
  if (it == sessions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no training session '", id, "' (never started, aborted or expired)"));
  }
  it->second->Touch(Now());
  return it->second;
}

absl::Status TrainingSessions::Abort(absl::string_view id) {
  std::shared_ptr<TrainingSession> session;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(std::string(id));
    if (it == sessions_.end()) {
      return absl::NotFoundError(absl::StrCat("no training session '", id, "'"));
    }
    session = std::move(it->second);
    sessions_.erase(it);
  }
  return session->CloseWhenUnused();
}

int TrainingSessions::ExpireIdle() {
  std::vector<std::shared_ptr<TrainingSession>> expired;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = Now();
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      // A session in the middle of a step is not idle, however long the step takes.
      if (now - it->second->last_used() > options_.idle_timeout && it->second->uses() == 0) {
        expired.push_back(std::move(it->second));
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  const int n = static_cast<int>(expired.size());
  Close(std::move(expired));
  return n;
}

void TrainingSessions::AbortAll() {
  std::vector<std::shared_ptr<TrainingSession>> all;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, s] : sessions_) all.push_back(std::move(s));
    sessions_.clear();
  }
  Close(std::move(all));
}

std::vector<TrainingSessionInfo> TrainingSessions::List() const {
  std::vector<std::shared_ptr<TrainingSession>> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) all.push_back(s);
  }
  std::vector<TrainingSessionInfo> out;
  out.reserve(all.size());
  for (const auto& s : all) out.push_back(s->Info());
  return out;
}

int TrainingSessions::SessionCount(absl::string_view model) const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [id, s] : sessions_) n += s->model() == model;
  return n;
}

}  // namespace ndserve::engine
