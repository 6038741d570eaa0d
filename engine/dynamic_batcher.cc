#include "engine/dynamic_batcher.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace ndserve::engine {

absl::Status WithRejectReason(absl::Status status, absl::string_view reason) {
  status.SetPayload(kRejectReasonPayload, absl::Cord(reason));
  return status;
}

absl::string_view RejectReason(const absl::Status& status) {
  const auto payload = status.GetPayload(kRejectReasonPayload);
  if (!payload.has_value()) return {};
  // The label values come from this fixed set, never from the payload's bytes.
  for (absl::string_view reason : {kRejectQueueFull, kRejectTimeout, kRejectDeadline}) {
    if (*payload == reason) return reason;
  }
  return {};
}

namespace {

absl::Status ExpiredStatus(const InferenceRequest& request, absl::Time timeout, bool reject,
                           absl::Time now);

absl::Duration SaturatingMicros(uint64_t us) {
  return absl::Microseconds(static_cast<int64_t>(
      std::min<uint64_t>(us, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))));
}

}  // namespace

DynamicBatcher::DynamicBatcher(PredictorPool* pool, Options options)
    : pool_(pool), options_(std::move(options)), waiting_(options_.priority_levels + 1, 0) {
  // One lane per predictor: a lane runs one batch at a time, so none ever waits for a lease.
  const size_t lanes = std::max<size_t>(1, pool->size());
  lanes_.reserve(lanes);
  for (size_t i = 0; i < lanes; ++i) lanes_.emplace_back([this] { Lane(); });
  timer_ = std::thread([this] { Timer(); });
}

DynamicBatcher::~DynamicBatcher() { Shutdown(); }

bool DynamicBatcher::Compatible(const InferenceRequest& a, const ValidatedRequest& plan_a,
                                const InferenceRequest& b, const ValidatedRequest& plan_b) {
  // A merged run stops on its lead's cancel flag, so only requests sharing it may merge.
  if (a.inputs.size() != b.inputs.size() || a.cancel != b.cancel ||
      plan_a.input_tensor != plan_b.input_tensor || plan_a.outputs != plan_b.outputs) {
    return false;
  }
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const InferInputTensor& x = a.inputs[i];
    const InferInputTensor& y = b.inputs[i];
    // BYTES elements have no fixed row size to concatenate and cut by.
    if (x.name != y.name || x.dtype != y.dtype || x.dtype == DType::kBytes ||
        x.shape.size() != y.shape.size() || x.shape.empty() ||
        !std::equal(x.shape.begin() + 1, x.shape.end(), y.shape.begin() + 1)) {
      return false;
    }
  }
  return true;
}

DynamicBatcher::Stats DynamicBatcher::stats() const {
  absl::MutexLock lock(&mu_);
  return {.caller_runs = caller_runs_,
          .lane_runs = lane_runs_,
          .padded_rows = padded_rows_.load(std::memory_order_relaxed)};
}

int64_t DynamicBatcher::PaddedRows(int64_t rows, int64_t max_rows) {
  int64_t padded = 1;
  while (padded < rows) padded *= 2;
  return std::max(rows, std::min(padded, max_rows));
}

void DynamicBatcher::SetBeforeRunForTesting(
    std::function<void(const InferenceRequest&)> before_run) {
  absl::MutexLock lock(&mu_);
  before_run_ = std::move(before_run);
}

size_t DynamicBatcher::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size() + gathering_;
}

void DynamicBatcher::Enqueue(const InferenceRequest& request, const ValidatedRequest& plan,
                             Done done) {
  const absl::Time now = absl::Now();
  auto item = std::make_unique<Item>();
  item->request = &request;
  item->plan = plan;
  item->done = std::move(done);
  item->queued = now;
  item->level = LevelOf(request);
  const QueuePolicyConfig& policy = PolicyOf(item->level);
  item->reject = policy.timeout_action == QueuePolicyConfig::TimeoutAction::kReject;
  uint64_t timeout_us = policy.default_timeout_microseconds;
  if (policy.allow_timeout_override && request.timeout_microseconds > 0) {
    timeout_us = request.timeout_microseconds;
  }
  item->timeout = timeout_us > 0 ? now + SaturatingMicros(timeout_us) : absl::InfiniteFuture();

  Batch expired;
  mu_.Lock();
  TakeExpiredLocked(now, &expired);
  if (stopping_) {
    item->outcome.response = absl::UnavailableError("the model is unloading");
  } else if (policy.max_queue_size > 0 && waiting_[item->level] >= policy.max_queue_size) {
    item->outcome.response = WithRejectReason(
        absl::UnavailableError(absl::StrCat(
            "the model's queue is full (max_queue_size ", policy.max_queue_size,
            options_.priority_levels > 0 ? absl::StrCat(" at priority level ", item->level) : "",
            "); retry later")),
        kRejectQueueFull);
  } else if (absl::Status expired_now = ExpiredStatus(request, item->timeout, item->reject, now);
             !expired_now.ok()) {
    // Already past its deadline: answered here, not by the timer a moment later.
    item->outcome.response = std::move(expired_now);
  } else if (options_.max_queue_delay == absl::ZeroDuration() && queue_.empty() &&
             running_ < lanes_.size() &&
             ExpiredStatus(*item->request, item->timeout, /*reject=*/true, now).ok()) {
    // The fast path (see the class comment). The predictor is given back before `done`
    // sends the reply, so that a client sending its next request as soon as it has the
    // reply finds it free, not still "running" (which would queue that request for a lane).
    ++running_;
    ++caller_runs_;
    mu_.Unlock();
    Finish(expired);
    Batch lone;
    const int64_t rows = item->plan.batch_size;
    lone.push_back(std::move(item));
    RunBatch(lone, rows);
    {
      absl::MutexLock lock(&mu_);
      --running_;
    }
    Finish(lone);
    return;
  } else {
    // A request that expires before the timer's next wake-up makes it re-arm.
    if (ExpiryOf(*item) < timer_at_) timer_rearm_ = true;
    ++waiting_[item->level];
    // Higher priority (a lower level) first; FIFO within a level.
    auto at = queue_.end();
    while (at != queue_.begin() && (*std::prev(at))->level > item->level) --at;
    queue_.insert(at, std::move(item));
  }
  mu_.Unlock();
  Finish(expired);
  if (item != nullptr) {
    Batch refused;
    refused.push_back(std::move(item));
    Finish(refused);
  }
}

void DynamicBatcher::Shutdown() {
  Batch waiting;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    while (!queue_.empty()) {
      --waiting_[queue_.front()->level];
      waiting.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  for (auto& item : waiting) {
    item->outcome.response = absl::UnavailableError("the model is unloading");
  }
  Finish(waiting);
  // Concurrent callers all return only once the lanes are gone.
  absl::MutexLock lock(&shutdown_mu_);
  for (std::thread& lane : lanes_) {
    if (lane.joinable()) lane.join();
  }
  if (timer_.joinable()) timer_.join();
}

namespace {

// DEADLINE_EXCEEDED if `item`'s client deadline, or its REJECT timeout, passed by `now`.
absl::Status ExpiredStatus(const InferenceRequest& request, absl::Time timeout, bool reject,
                           absl::Time now) {
  if (now >= request.deadline) {
    return WithRejectReason(
        absl::DeadlineExceededError("the request's deadline passed while it was queued; it did "
                                    "not run"),
        kRejectDeadline);
  }
  if (reject && now >= timeout) {
    return WithRejectReason(
        absl::DeadlineExceededError("the request timed out in the model's queue "
                                    "(its queue policy); it did not run"),
        kRejectTimeout);
  }
  return absl::OkStatus();
}

}  // namespace

void DynamicBatcher::TakeExpiredLocked(absl::Time now, Batch* expired) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    Item& item = **it;
    absl::Status status = ExpiredStatus(*item.request, item.timeout, item.reject, now);
    if (!status.ok()) {
      item.outcome.response = std::move(status);
      --waiting_[item.level];
      expired->push_back(std::move(*it));
      it = queue_.erase(it);
      continue;
    }
    if (now >= item.timeout) item.late = true;
    ++it;
  }
}

void DynamicBatcher::FillBatchLocked(Batch* batch, int64_t* rows) {
  const Item& lead = *batch->front();
  for (auto it = queue_.begin(); it != queue_.end() && *rows < options_.max_batch_size;) {
    Item& other = **it;
    if (*rows + other.plan.batch_size <= options_.max_batch_size &&
        Compatible(*lead.request, lead.plan, *other.request, other.plan)) {
      *rows += other.plan.batch_size;
      batch->push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
}

void DynamicBatcher::Lane() {
  auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (!queue_.empty() && running_ < lanes_.size());
  };
  mu_.Lock();
  while (true) {
    mu_.Await(absl::Condition(&has_work));
    if (stopping_) break;
    Batch expired;
    TakeExpiredLocked(absl::Now(), &expired);
    if (!expired.empty() || queue_.empty()) {
      mu_.Unlock();
      Finish(expired);
      mu_.Lock();
      continue;
    }
    // The oldest request that is on time leads; late (DELAY) ones only when none is.
    auto lead = std::find_if(queue_.begin(), queue_.end(), [](const auto& i) { return !i->late; });
    if (lead == queue_.end()) lead = queue_.begin();
    Batch batch;
    batch.push_back(std::move(*lead));
    queue_.erase(lead);
    int64_t rows = batch[0]->plan.batch_size;
    FillBatchLocked(&batch, &rows);
    gathering_ += batch.size();
    ++running_;
    if (options_.max_queue_delay > absl::ZeroDuration()) {
      // Gather until the batch is full or its lead has waited its delay.
      const absl::Time until = batch[0]->queued + options_.max_queue_delay;
      size_t seen = queue_.size();
      auto arrivals = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || queue_.size() > seen;
      };
      while (rows < options_.max_batch_size && !stopping_ &&
             mu_.AwaitWithDeadline(absl::Condition(&arrivals), until)) {
        const size_t before = batch.size();
        FillBatchLocked(&batch, &rows);
        gathering_ += batch.size() - before;
        seen = queue_.size();
      }
    }
    gathering_ -= batch.size();
    for (const auto& item : batch) --waiting_[item->level];
    const bool stopping = stopping_;
    mu_.Unlock();
    if (stopping) {
      for (auto& item : batch) item->outcome.response = absl::UnavailableError("the model is unloading");
      Finish(batch);
      mu_.Lock();
      --running_;
      break;
    }
    // A member whose deadline passed while the batch gathered does not run.
    const absl::Time now = absl::Now();
    Batch run, dropped;
    rows = 0;
    for (auto& item : batch) {
      absl::Status status = ExpiredStatus(*item->request, item->timeout, item->reject, now);
      if (status.ok()) {
        rows += item->plan.batch_size;
        run.push_back(std::move(item));
      } else {
        item->outcome.response = std::move(status);
        dropped.push_back(std::move(item));
      }
    }
    Finish(dropped);
    if (!run.empty()) RunBatch(run, rows);
    // The predictor is free before the replies go out, as on the fast path.
    mu_.Lock();
    --running_;
    if (!run.empty()) ++lane_runs_;
    mu_.Unlock();
    Finish(run);
    mu_.Lock();
  }
  mu_.Unlock();
}

absl::Time DynamicBatcher::ExpiryOf(const Item& item) const {
  return item.reject ? std::min(item.request->deadline, item.timeout) : item.request->deadline;
}

uint64_t DynamicBatcher::LevelOf(const InferenceRequest& request) const {
  if (options_.priority_levels == 0) return 0;
  // As Triton: no priority, or one beyond the levels, is the default level.
  if (request.priority == 0 || request.priority > options_.priority_levels) {
    return options_.default_priority_level;
  }
  return request.priority;
}

const QueuePolicyConfig& DynamicBatcher::PolicyOf(uint64_t level) const {
  const auto it = options_.priority_queue_policy.find(level);
  return it != options_.priority_queue_policy.end() ? it->second : options_.queue_policy;
}

void DynamicBatcher::Timer() {
  mu_.Lock();
  while (!stopping_) {
    timer_rearm_ = false;
    timer_at_ = absl::InfiniteFuture();
    for (const auto& item : queue_) timer_at_ = std::min(timer_at_, ExpiryOf(*item));
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || timer_rearm_; };
    if (mu_.AwaitWithDeadline(absl::Condition(&woken), timer_at_)) continue;
    // The earliest expiry passed with every lane busy (or none looking): answer now.
    Batch expired;
    TakeExpiredLocked(absl::Now(), &expired);
    if (expired.empty()) continue;
    mu_.Unlock();
    Finish(expired);
    mu_.Lock();
  }
  mu_.Unlock();
}

void DynamicBatcher::Finish(Batch& batch) {
  for (auto& item : batch) {
    item->done(std::move(item->outcome));
    item.reset();
  }
  batch.clear();
}

void DynamicBatcher::RunEach(Predictor& predictor, Batch& batch, absl::Time start) {
  for (auto& item : batch) {
    Outcome& outcome = item->outcome;
    outcome.response = predictor.Predict(*item->request, item->plan);
    outcome.executed = outcome.response.ok();
    if (outcome.response.ok()) {
      outcome.response->timings.queue_ns = absl::ToInt64Nanoseconds(start - item->queued);
    }
  }
}

void DynamicBatcher::RunBatch(Batch& batch, int64_t rows) {
  const absl::Time start = absl::Now();
  absl::StatusOr<PredictorPool::Lease> lease = pool_->Acquire();
  if (!lease.ok()) {
    for (auto& item : batch) item->outcome.response = lease.status();
    return;
  }
  if (before_run_) before_run_(*batch[0]->request);
  if (batch.size() == 1) {
    RunEach(**lease, batch, start);
    return;
  }
  // One request of `rows` rows (`run_rows` with the pad): every input is the items'
  // inputs stacked in order, then the last row again for each padded row.
  const int64_t run_rows = options_.pad_to_power_of_two
                               ? PaddedRows(rows, options_.max_batch_size)
                               : rows;
  if (run_rows > rows) padded_rows_.fetch_add(run_rows - rows, std::memory_order_relaxed);
  const InferenceRequest& lead = *batch[0]->request;
  InferenceRequest merged;
  merged.model_name = lead.model_name;
  merged.model_version = lead.model_version;
  merged.requested_outputs = lead.requested_outputs;
  merged.cancel = lead.cancel;
  std::vector<std::vector<uint8_t>> stacked(lead.inputs.size());
  for (size_t i = 0; i < lead.inputs.size(); ++i) {
    size_t bytes = 0;
    for (const auto& item : batch) bytes += item->request->inputs[i].data.size();
    const size_t row_bytes = bytes / static_cast<size_t>(rows);
    stacked[i].reserve(row_bytes * static_cast<size_t>(run_rows));
    for (const auto& item : batch) {
      const absl::Span<const uint8_t> data = item->request->inputs[i].data;
      stacked[i].insert(stacked[i].end(), data.begin(), data.end());
    }
    // Sized first, then copied: insert() may not take a range of the vector itself.
    stacked[i].resize(row_bytes * static_cast<size_t>(run_rows));
    uint8_t* rows_data = stacked[i].data();
    for (int64_t pad = rows; pad < run_rows; ++pad) {
      std::memcpy(rows_data + pad * row_bytes, rows_data + (rows - 1) * row_bytes, row_bytes);
    }
    InferInputTensor& t = merged.inputs.emplace_back();
    t.name = lead.inputs[i].name;
    t.dtype = lead.inputs[i].dtype;
    t.shape = lead.inputs[i].shape;
    t.shape[0] = run_rows;
    t.data = absl::MakeConstSpan(stacked[i]);
  }
  ValidatedRequest plan = batch[0]->plan;
  plan.batch_size = run_rows;
  absl::StatusOr<InferenceResponse> whole = (*lease)->Predict(merged, plan);
  if (!whole.ok()) {
    // The failure may belong to one member's data, and its message may quote that
    // member's values: each member runs alone and gets its own result instead.
    RunEach(**lease, batch, start);
    return;
  }
  for (const InferOutputTensor& out : whole->outputs) {
    if (out.shape.empty() || out.shape[0] != run_rows || out.dtype == DType::kBytes ||
        out.data.size() % static_cast<size_t>(run_rows) != 0) {
      // An output that is not one row per input row cannot be cut back apart.
      RunEach(**lease, batch, start);
      return;
    }
  }
  int64_t first_row = 0;
  for (auto& item : batch) {
    const int64_t n = item->plan.batch_size;
    InferenceResponse response;
    response.model_name = whole->model_name;
    response.model_version = whole->model_version;
    response.id = item->request->id;
    response.timings = whole->timings;
    response.timings.queue_ns = absl::ToInt64Nanoseconds(start - item->queued);
    for (const InferOutputTensor& out : whole->outputs) {
      const size_t row_bytes = out.data.size() / static_cast<size_t>(run_rows);
      InferOutputTensor& piece = response.outputs.emplace_back();
      piece.name = out.name;
      piece.dtype = out.dtype;
      piece.shape = out.shape;
      piece.shape[0] = n;
      piece.data.assign(out.data.begin() + first_row * row_bytes,
                        out.data.begin() + (first_row + n) * row_bytes);
    }
    first_row += n;
    item->outcome.response = std::move(response);
  }
  batch[0]->outcome.executed = true;
}

}  // namespace ndserve::engine
