#ifndef NDSERVE_ENGINE_DYNAMIC_BATCHER_H_
#define NDSERVE_ENGINE_DYNAMIC_BATCHER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
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
// Priorities (Triton's priority_levels): a request queues at its level, and a lane
// takes the highest level's oldest request first; a batch is filled in that order too.
//
// Overload (the queue policy, Triton's ModelQueuePolicy, per priority level): a request
// that finds max_queue_size requests of its level waiting (queued, or in a batch still
// gathering) is refused at once with UNAVAILABLE. A queued request
// whose timeout (the policy's, or the request's own where allowed) or client deadline
// has passed never runs: it fails with DEADLINE_EXCEEDED (with timeout_action DELAY, a
// timed-out request instead waits until no request that is on time is waiting). A timer
// thread answers each queued request when its deadline or REJECT timeout passes, even
// while every lane is busy with a long batch (a request in a batch still gathering is
// checked when the batch closes, at most max_queue_delay later).
//
// Without batching (max_batch_size 0 here) nothing merges: each request runs alone, but
// still waits in the queue, not on a caller's thread, while every predictor is busy.
//
// A lone request runs at once on the caller's thread, as it would without batching, when
// nothing is queued, a predictor is free and max_queue_delay is 0: handing it to a lane
// would cost a thread wake-up (tens of microseconds on a small VM) on every request of a
// lightly loaded model for no batching gain. Under load requests queue and lanes batch.
// A predictor counts as in use from taking a request (or batch) until its run ended, not
// until its `done` returned: `done` sends the reply, and a client that sends its next
// request as soon as it has the reply must find the predictor free, or a sequential
// client would pay the lane's wake-up on every request after the first.
//
// Ownership: borrows the predictor pool, which must outlive it and which nothing else
// may lease from; owns its lane threads. Thread-safe. Every accepted `done` is called
// exactly once: on a lane or the timer thread, or on the caller's thread before Enqueue returns when
// the request is refused or ran on the fast path. Shutdown (or the destructor) fails what still waits with
// UNAVAILABLE and joins the lanes, so `done` must not drop the last reference to the
// object that owns the batcher.
class DynamicBatcher {
 public:
  struct Options {
    // Rows per merged run; 0: requests never merge (a model without dynamic batching).
    int64_t max_batch_size = 1;
    absl::Duration max_queue_delay = absl::ZeroDuration();
    QueuePolicyConfig queue_policy;
    // Triton's priority levels (1 first; 0 levels: none), with each level's own queue
    // policy where it has one; levels must be at most kMaxPriorityLevels.
    uint64_t priority_levels = 0;
    uint64_t default_priority_level = 0;
    std::map<uint64_t, QueuePolicyConfig> priority_queue_policy;
    // A merged batch of r rows runs as PaddedRows(r, max_batch_size) rows, the pad
    // repeating the last row (a copy of a valid row is valid input to any model), and
    // the pad's outputs are dropped. Requests that run alone are never padded.
    bool pad_to_power_of_two = false;
  };

  // The next power of two at or above `rows`, at most `max_rows` (and never below rows).
  static int64_t PaddedRows(int64_t rows, int64_t max_rows);

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

  // Predictor runs so far, by the thread that ran them: a caller's (the fast path) or a
  // lane's (a queued request or a batch). A merged batch is one run.
  struct Stats {
    uint64_t caller_runs = 0;
    uint64_t lane_runs = 0;
    uint64_t padded_rows = 0;  // rows added by Options::pad_to_power_of_two
  };
  Stats stats() const;

  // Tests only: `before_run` is called with the run's first request on the thread that
  // holds the predictor, before each run, so that a test can keep a predictor busy by
  // blocking in it (tests/unit/engine/batcher_test_util.h) instead of waiting on a clock.
  // Set it while no request is in flight; the daemon never sets it.
  void SetBeforeRunForTesting(std::function<void(const InferenceRequest&)> before_run);

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
    uint64_t level = 0;   // priority level; 0 without levels
    bool reject = true;   // its policy's timeout_action is REJECT
    bool late = false;    // timed out under timeout_action DELAY
    Outcome outcome;
  };
  using Batch = std::vector<std::unique_ptr<Item>>;

  void Lane();
  // Answers queued requests whose deadline or REJECT timeout passed while no lane looked.
  void Timer();
  // When `item` must be answered DEADLINE_EXCEEDED if still queued.
  absl::Time ExpiryOf(const Item& item) const;
  // The priority level `request` queues at, and that level's queue policy.
  uint64_t LevelOf(const InferenceRequest& request) const;
  const QueuePolicyConfig& PolicyOf(uint64_t level) const;
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
  // Ordered by priority level, then arrival.
  std::deque<std::unique_ptr<Item>> queue_ ABSL_GUARDED_BY(mu_);
  size_t gathering_ ABSL_GUARDED_BY(mu_) = 0;  // items in batches not yet running
  // Per level: items queued or gathering (what that level's max_queue_size bounds).
  std::vector<size_t> waiting_ ABSL_GUARDED_BY(mu_);
  // Predictors in use: by lanes (from taking a batch until its run ended) and by callers
  // running a lone request themselves (Enqueue's fast path). A lane takes work
  // only while one is free, so it never waits for a lease.
  size_t running_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t caller_runs_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t lane_runs_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> padded_rows_{0};  // bumped by RunBatch, outside mu_
  // Written under mu_ while idle, read by the thread that runs (see SetBeforeRunForTesting).
  std::function<void(const InferenceRequest&)> before_run_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // The timer's next wake-up (the earliest expiry it saw), and whether an earlier one
  // arrived since.
  absl::Time timer_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool timer_rearm_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex shutdown_mu_;  // held while joining the lanes
  std::vector<std::thread> lanes_;
  std::thread timer_;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_DYNAMIC_BATCHER_H_
