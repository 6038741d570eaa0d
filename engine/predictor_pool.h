#ifndef NDSERVE_ENGINE_PREDICTOR_POOL_H_
#define NDSERVE_ENGINE_PREDICTOR_POOL_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/predictor.h"

namespace ndserve::engine {

// The scheduler between a model's requests and its predictors (instance_group count):
// each request takes a free predictor, waiting in line while all are busy, runs on it
// and gives it back.
//
// Ownership: owns the predictors. Thread-safe: any thread may Acquire; Drain waits for
// every lease to come back.
class PredictorPool {
 public:
  // A predictor on loan; returns it when destroyed. Move-only.
  class Lease {
   public:
    Lease(Lease&& other) noexcept : pool_(other.pool_), index_(other.index_) {
      other.pool_ = nullptr;
    }
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (pool_ != nullptr) pool_->Release(index_);
    }
    Predictor& operator*() const { return *pool_->predictors_[index_]; }
    Predictor* operator->() const { return pool_->predictors_[index_].get(); }

   private:
    friend class PredictorPool;
    Lease(PredictorPool* pool, int index) : pool_(pool), index_(index) {}
    PredictorPool* pool_;
    int index_;
  };

  explicit PredictorPool(std::vector<std::unique_ptr<Predictor>> predictors);
  ~PredictorPool();  // Drain()s first

  // Waits for a free predictor. UNAVAILABLE once Drain has begun.
  absl::StatusOr<Lease> Acquire();

  // Refuses new leases, waits until every lease has come back, then closes the
  // predictors. Idempotent.
  void Drain();

  size_t size() const { return predictors_.size(); }
  // The predictors, for inspection (tests, stats); do not run requests on them directly.
  const std::vector<std::unique_ptr<Predictor>>& predictors() const { return predictors_; }

 private:
  void Release(int index);

  const std::vector<std::unique_ptr<Predictor>> predictors_;
  absl::Mutex mu_;
  std::vector<int> free_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_PREDICTOR_POOL_H_
