#ifndef NDSERVE_ENGINE_DYNAMIC_BATCHER_H_
#define NDSERVE_ENGINE_DYNAMIC_BATCHER_H_

#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/inference_request.h"
#include "engine/predictor_pool.h"
#include "engine/signature.h"

namespace ndserve::engine {

// Triton's dynamic batching for one model version (config `dynamic_batching { }`):
// requests that arrive while every predictor is busy wait in a queue, and whoever gets
// the next free predictor runs its own request together with the compatible requests
// queued behind it (same inputs in the same order, same datatypes and non-batch dims,
// same requested outputs) as one batch of up to max_batch_size rows. The outputs are
// cut back into one response per request. A lone request runs as it came, with no
// copy and no wait unless max_queue_delay asks for one.
//
// Runs on the callers' threads (no scheduler thread): the thread that takes a
// predictor is always one whose own request leads the batch, so nobody's response
// waits behind a batch it is not in.
//
// Ownership: borrows the predictor pool, which must outlive it and which nothing else
// may lease from. Thread-safe.
class DynamicBatcher {
 public:
  DynamicBatcher(PredictorPool* pool, int64_t max_batch_size, absl::Duration max_queue_delay);

  struct Outcome {
    absl::StatusOr<InferenceResponse> response;
    // This caller's thread ran the (successful) predictor call: count one execution.
    bool executed = false;
  };

  // Runs `request`, already validated as `plan`, alone or in a batch. The request's
  // bytes must stay valid until this returns.
  Outcome Run(const InferenceRequest& request, const ValidatedRequest& plan);

  // Whether two validated requests can share a batch.
  static bool Compatible(const InferenceRequest& a, const ValidatedRequest& plan_a,
                         const InferenceRequest& b, const ValidatedRequest& plan_b);

 private:
  struct Item {
    const InferenceRequest* request;
    const ValidatedRequest* plan;
    absl::Time queued;
    bool taken = false;  // in a batch (running or about to)
    bool done = false;
    absl::StatusOr<InferenceResponse> result = absl::UnknownError("not run");
  };

  // Moves `lead` and the compatible items queued after it (FIFO, up to the row limit)
  // out of the queue into `batch`.
  void TakeBatchLocked(Item* lead, std::vector<Item*>* batch, int64_t* rows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the batch on one predictor and fills every item's result. No lock held.
  void RunBatch(const std::vector<Item*>& batch, int64_t rows);
  // Runs the items one by one on `predictor` (outputs that cannot be split by rows).
  static void RunEach(Predictor& predictor, const std::vector<Item*>& batch);

  PredictorPool* const pool_;
  const int64_t max_batch_size_;
  const absl::Duration max_queue_delay_;
  absl::Mutex mu_;
  std::deque<Item*> queue_ ABSL_GUARDED_BY(mu_);
  int free_predictors_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_DYNAMIC_BATCHER_H_
