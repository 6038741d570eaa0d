#include "engine/model_stats.h"

#include "absl/time/clock.h"

namespace ndserve::engine {
namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
}  // namespace

void ModelStats::End() {
  last_inference_ms_.store(static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())), kRelaxed);
  inflight_.fetch_sub(1, kRelaxed);
}

void ModelStats::RecordSuccess(int64_t batch_size, const InferenceTimings& t, int64_t total_ns) {
  inference_count_.fetch_add(static_cast<uint64_t>(batch_size), kRelaxed);
  success_count_.fetch_add(1, kRelaxed);
  success_ns_.fetch_add(static_cast<uint64_t>(total_ns), kRelaxed);
  queue_ns_.fetch_add(static_cast<uint64_t>(t.queue_ns), kRelaxed);
  compute_input_ns_.fetch_add(static_cast<uint64_t>(t.compute_input_ns), kRelaxed);
  compute_infer_ns_.fetch_add(static_cast<uint64_t>(t.compute_infer_ns), kRelaxed);
  compute_output_ns_.fetch_add(static_cast<uint64_t>(t.compute_output_ns), kRelaxed);
  End();
}

void ModelStats::RecordFailure(int64_t total_ns) {
  fail_count_.fetch_add(1, kRelaxed);
  fail_ns_.fetch_add(static_cast<uint64_t>(total_ns), kRelaxed);
  End();
}

ModelStatsSnapshot ModelStats::Snapshot() const {
  ModelStatsSnapshot s;
  s.name = name_;
  s.version = version_;
  s.last_inference_ms = last_inference_ms_.load(kRelaxed);
  s.inference_count = inference_count_.load(kRelaxed);
  s.success_count = success_count_.load(kRelaxed);
  s.execution_count = execution_count_.load(kRelaxed);
  s.success_ns = success_ns_.load(kRelaxed);
  s.fail_count = fail_count_.load(kRelaxed);
  s.fail_ns = fail_ns_.load(kRelaxed);
  s.queue_ns = queue_ns_.load(kRelaxed);
  s.compute_input_ns = compute_input_ns_.load(kRelaxed);
  s.compute_infer_ns = compute_infer_ns_.load(kRelaxed);
  s.compute_output_ns = compute_output_ns_.load(kRelaxed);
  s.inflight = inflight_.load(kRelaxed);
  return s;
}

}  // namespace ndserve::engine
