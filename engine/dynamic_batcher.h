#ifndef NDSERVE_ENGINE_DYNAMIC_BATCHER_H_
#define NDSERVE_ENGINE_DYNAMIC_BATCHER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/inference_request.h"
#include "engine/model_config.h"
#include "engine/predictor_pool.h"
#include "engine/signature.h"

namespace ndserve::engine {

// Why a request was refused without running, carried as a payload of its status so that
// the server can count it (the values are the `reason` label of
// ndserve_inference_rejected_total, docs/design.md §7).
inline constexpr absl::string_view kRejectReasonPayload = "ndserve.reject_reason";
inline constexpr absl::string_view kRejectQueueFull = "queue_full";  // UNAVAILABLE
inline constexpr absl::string_view kRejectTimeout = "timeout";       // queue policy timeout
inline constexpr absl::string_view kRejectDeadline = "deadline";     // the client's deadline
// `status` with `reason` attached.
absl::Status WithRejectReason(absl::Status status, absl::string_view reason);
// One of the kReject* constants, or empty when `status` carries none.
absl::string_view RejectReason(const absl::Status& status);

// Triton's dynamic batching for one model version (config `dynamic_batching { }`),
// asynchronous: Enqueue queues a request and returns at once; the batcher's own threads
// ("lanes", one per predictor, each running at most one batch at a time) take the oldest
// request, merge the compatible ones queued behind it (same inputs in the same order,
// same datatypes and non-batch dims, same requested outputs) up to max_batch_size rows,
// wait at most max_queue_delay for more to join, run the batch and cut the outputs back
// into one response per request. So a request waiting for company holds no caller's
// thread, and one model's queue delay never delays another model (docs/design.md §6).
//
// Isolation: a merged run that fails is rerun one request at a time, so a request whose
// own data makes the model fail (an out-of-range embedding id, say) fails alone, and its
// message speaks only of its own values; the others get their results.
//
// Overload (the queue policy, Triton's ModelQueuePolicy): a request that finds
// max_queue_size requests waiting (queued, or in a batch still gathering) is refused at
// once with UNAVAILABLE. A queued request
// whose timeout (the policy's, or the request's own where allowed) or client deadline
// has passed never runs: it fails with DEADLINE_EXCEEDED (with timeout_action DELAY, a
// timed-out request instead waits until no request that is on time is waiting). Expired
// requests are noticed when a lane next looks at the queue, or when a request arrives.
//
// A lone request runs at once on the caller's thread, as it would without batching, when
// nothing is queued, a predictor is free and max_queue_delay is 0: handing it to a lane
// would cost a thread wake-up (tens of microseconds on a small VM) on every request of a
// lightly loaded model for no batching gain. Under load requests queue and lanes batch.
//
// Ownership: borrows the predictor pool, which must outlive it and which nothing else
// may lease from; owns its lane threads. Thread-safe. Every accepted `done` is called
// exactly once: on a lane thread, or on the caller's thread before Enqueue returns when
// the request is refused or ran on the fast path. Shutdown (or the destructor) fails what still waits with
// UNAVAILABLE and joins the lanes, so `done` must not drop the last reference to the
// object that owns the batcher.
class DynamicBatcher {
 public:
  struct Options {
    int64_t max_batch_size = 1;
    absl::Duration max_queue_delay = absl::ZeroDuration();
    QueuePolicyConfig queue_policy;
  };

  struct Outcome {
    absl::StatusOr<InferenceResponse> response;
    // A predictor run on this request's behalf succeeded and is counted here: one per
    // merged batch (on its first member) and one per request rerun alone.
    bool executed = false;
  };
  using Done = absl::AnyInvocable<void(Outcome)>;

  DynamicBatcher(PredictorPool* pool, Options options);
  ~DynamicBatcher();  // Shutdown()
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues `request`, already validated as `plan`. The request's bytes must stay valid
  // until `done` is called; `done` is the last thing the batcher does with them.
  void Enqueue(const InferenceRequest& request, const ValidatedRequest& plan, Done done);

  // Refuses new requests, fails the queued ones (and batches still gathering) with
  // UNAVAILABLE, waits for running batches, joins the lanes. Idempotent; not from `done`.
  void Shutdown();

  // Requests waiting: queued, or in a batch that is still gathering. This is what
  // max_queue_size bounds.
  size_t queued() const;

  // Whether two validated requests can share a batch.
  static bool Compatible(const InferenceRequest& a, const ValidatedRequest& plan_a,
                         const InferenceRequest& b, const ValidatedRequest& plan_b);

 private:
  struct Item {
    const InferenceRequest* request;
    ValidatedRequest plan;
    Done done;
    absl::Time queued;
    absl::Time timeout;   // the queue policy's; InfiniteFuture: none
    bool late = false;    // timed out under timeout_action DELAY
    Outcome outcome;
  };
  using Batch = std::vector<std::unique_ptr<Item>>;

  void Lane();
  // Moves every queued item whose deadline (or REJECT timeout) passed by `now` into
  // `expired`, with its DEADLINE_EXCEEDED outcome; marks DELAY items late.
  void TakeExpiredLocked(absl::Time now, Batch* expired) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the queued items compatible with batch[0] (FIFO, up to the row limit) into
  // `batch`. Late items may ride along: joining a batch delays no one.
  void FillBatchLocked(Batch* batch, int64_t* rows) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the batch on one predictor and fills every item's outcome. No lock held.
  void RunBatch(Batch& batch, int64_t rows);
  // Runs the items one by one on `predictor`.
  static void RunEach(Predictor& predictor, Batch& batch, absl::Time start);
  // Calls every item's `done` with its outcome, then destroys the items. No lock held.
  static void Finish(Batch& batch);

  PredictorPool* const pool_;
  const Options options_;
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Item>> queue_ ABSL_GUARDED_BY(mu_);
  size_t gathering_ ABSL_GUARDED_BY(mu_) = 0;  // items in batches not yet running
  // Predictors in use: by lanes (from taking a batch until its `done`s returned) and by
  // callers running a lone request themselves (Enqueue's fast path). A lane takes work
  // only while one is free, so it never waits for a lease.
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex shutdown_mu_;  // held while joining the lanes
  std::vector<std::thread> lanes_;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_DYNAMIC_BATCHER_H_
