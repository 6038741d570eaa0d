#include "engine/predictor_pool.h"

#include <utility>

#include "absl/status/status.h"
#include "base/logging.h"

namespace ndserve::engine {

PredictorPool::PredictorPool(std::vector<std::unique_ptr<Predictor>> predictors)
    : predictors_(std::move(predictors)) {
  absl::MutexLock lock(&mu_);
  // Lowest index on top: with light load the same predictor (and its warm caches) is used.
  for (int i = static_cast<int>(predictors_.size()) - 1; i >= 0; --i) free_.push_back(i);
}

PredictorPool::~PredictorPool() { Drain(); }

absl::StatusOr<PredictorPool::Lease> PredictorPool::Acquire() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return draining_ || !free_.empty(); };
  mu_.Await(absl::Condition(&ready));
  if (draining_) return absl::UnavailableError("the model is being unloaded");
  const int index = free_.back();
  free_.pop_back();
  return Lease(this, index);
}

void PredictorPool::Release(int index) {
  absl::MutexLock lock(&mu_);
  free_.push_back(index);
}

void PredictorPool::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  auto all_back = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return free_.size() == predictors_.size();
  };
  mu_.Await(absl::Condition(&all_back));
  if (closed_) return;
  closed_ = true;
  for (const auto& p : predictors_) {
    absl::Status status = p->Close();
    if (!status.ok()) LOG(ERROR) << "closing predictor " << p->index() << ": " << status;
  }
}

}  // namespace ndserve::engine
