#include "engine/dynamic_batcher.h"

#include <utility>
#include <vector>

#include "absl/time/clock.h"

namespace ndserve::engine {

DynamicBatcher::DynamicBatcher(PredictorPool* pool, int64_t max_batch_size,
                               absl::Duration max_queue_delay)
    : pool_(pool),
      max_batch_size_(max_batch_size),
      max_queue_delay_(max_queue_delay),
      free_predictors_(static_cast<int>(pool->size())) {}

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

void DynamicBatcher::TakeBatchLocked(Item* lead, std::vector<Item*>* batch, int64_t* rows) {
  if (!lead->taken) {
    std::erase(queue_, lead);
    lead->taken = true;
    batch->push_back(lead);
    *rows += lead->plan->batch_size;
  }
  for (auto it = queue_.begin(); it != queue_.end() && *rows < max_batch_size_;) {
    Item* other = *it;
    if (*rows + other->plan->batch_size <= max_batch_size_ &&
        Compatible(*lead->request, *lead->plan, *other->request, *other->plan)) {
      other->taken = true;
      batch->push_back(other);
      *rows += other->plan->batch_size;
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
}

DynamicBatcher::Outcome DynamicBatcher::Run(const InferenceRequest& request,
                                            const ValidatedRequest& plan) {
  Item item{&request, &plan, absl::Now()};
  Outcome outcome;
  mu_.Lock();
  queue_.push_back(&item);
  while (true) {
    // Only a request still in the queue takes a predictor: one already in someone's
    // batch just waits for that batch.
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return item.done || (!item.taken && free_predictors_ > 0);
    };
    mu_.Await(absl::Condition(&ready));
    if (item.done) break;
    --free_predictors_;
    std::vector<Item*> batch;
    int64_t rows = 0;
    TakeBatchLocked(&item, &batch, &rows);
    if (max_queue_delay_ > absl::ZeroDuration()) {
      // Hold the predictor until the batch is full or the lead has waited its delay.
      const absl::Time deadline = item.queued + max_queue_delay_;
      size_t seen = queue_.size();
      auto arrivals = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.size() > seen; };
      while (rows < max_batch_size_ && mu_.AwaitWithDeadline(absl::Condition(&arrivals), deadline)) {
        TakeBatchLocked(&item, &batch, &rows);
        seen = queue_.size();
      }
    }
    mu_.Unlock();
    RunBatch(batch, rows);
    mu_.Lock();
    ++free_predictors_;
    outcome.executed = item.result.ok();
    for (Item* it : batch) it->done = true;  // their owners may return from here on
  }
  outcome.response = std::move(item.result);
  mu_.Unlock();
  return outcome;
}

void DynamicBatcher::RunEach(Predictor& predictor, const std::vector<Item*>& batch) {
  for (Item* it : batch) {
    const absl::Time start = absl::Now();
    it->result = predictor.Predict(*it->request, *it->plan);
    if (it->result.ok()) it->result->timings.queue_ns = absl::ToInt64Nanoseconds(start - it->queued);
  }
}

void DynamicBatcher::RunBatch(const std::vector<Item*>& batch, int64_t rows) {
  const absl::Time start = absl::Now();
  absl::StatusOr<PredictorPool::Lease> lease = pool_->Acquire();
  if (!lease.ok()) {
    for (Item* it : batch) it->result = lease.status();
    return;
  }
  if (batch.size() == 1) {
    RunEach(**lease, batch);
    return;
  }
  // One request of `rows` rows: every input is the items' inputs stacked in order.
  const InferenceRequest& lead = *batch[0]->request;
  InferenceRequest merged;
  merged.model_name = lead.model_name;
  merged.model_version = lead.model_version;
  merged.requested_outputs = lead.requested_outputs;
  merged.cancel = lead.cancel;
  std::vector<std::vector<uint8_t>> stacked(lead.inputs.size());
  for (size_t i = 0; i < lead.inputs.size(); ++i) {
    size_t bytes = 0;
    for (const Item* it : batch) bytes += it->request->inputs[i].data.size();
    stacked[i].reserve(bytes);
    for (const Item* it : batch) {
      const absl::Span<const uint8_t> data = it->request->inputs[i].data;
      stacked[i].insert(stacked[i].end(), data.begin(), data.end());
    }
    InferInputTensor& t = merged.inputs.emplace_back();
    t.name = lead.inputs[i].name;
    t.dtype = lead.inputs[i].dtype;
    t.shape = lead.inputs[i].shape;
    t.shape[0] = rows;
    t.data = absl::MakeConstSpan(stacked[i]);
  }
  ValidatedRequest plan = *batch[0]->plan;
  plan.batch_size = rows;
  absl::StatusOr<InferenceResponse> whole = (*lease)->Predict(merged, plan);
  if (!whole.ok()) {
    for (Item* it : batch) it->result = whole.status();
    return;
  }
  for (const InferOutputTensor& out : whole->outputs) {
    if (out.shape.empty() || out.shape[0] != rows || out.dtype == DType::kBytes ||
        out.data.size() % static_cast<size_t>(rows) != 0) {
      // An output that is not one row per input row cannot be cut back apart.
      RunEach(**lease, batch);
      return;
    }
  }
  int64_t first_row = 0;
  for (Item* it : batch) {
    const int64_t n = it->plan->batch_size;
    InferenceResponse response;
    response.model_name = whole->model_name;
    response.model_version = whole->model_version;
    response.id = it->request->id;
    response.timings = whole->timings;
    response.timings.queue_ns = absl::ToInt64Nanoseconds(start - it->queued);
    for (const InferOutputTensor& out : whole->outputs) {
      const size_t row_bytes = out.data.size() / static_cast<size_t>(rows);
      InferOutputTensor& piece = response.outputs.emplace_back();
      piece.name = out.name;
      piece.dtype = out.dtype;
      piece.shape = out.shape;
      piece.shape[0] = n;
      piece.data.assign(out.data.begin() + first_row * row_bytes,
                        out.data.begin() + (first_row + n) * row_bytes);
    }
    first_row += n;
    it->result = std::move(response);
  }
}

}  // namespace ndserve::engine
