#ifndef NDSERVE_ENGINE_MODEL_STATS_H_
#define NDSERVE_ENGINE_MODEL_STATS_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "engine/inference_request.h"

namespace ndserve::engine {

// One reading of a model version's counters, in the shape of KServe/Triton's
// ModelStatistics. Durations are cumulative nanoseconds. A plain value.
struct ModelStatsSnapshot {
  std::string name;
  int64_t version = 0;
  uint64_t last_inference_ms = 0;  // Unix epoch ms of the last finished request, 0: none
  uint64_t inference_count = 0;    // batch items served successfully
  uint64_t execution_count = 0;    // successful graph runs (a dynamic batch is one)
  uint64_t success_count = 0;
  uint64_t success_ns = 0;  // request durations, queue included
  uint64_t fail_count = 0;
  uint64_t fail_ns = 0;
  uint64_t queue_ns = 0;
  uint64_t compute_input_ns = 0;
  uint64_t compute_infer_ns = 0;
  uint64_t compute_output_ns = 0;
  int64_t inflight = 0;  // requests inside Infer right now (queued or running)
};

// The counters the server's statistics RPC and metrics read. Lock-free: relaxed atomics
// bumped once per request. Thread-safe.
class ModelStats {
 public:
  ModelStats(std::string name, int64_t version) : name_(std::move(name)), version_(version) {}

  void Begin() { inflight_.fetch_add(1, std::memory_order_relaxed); }
  void RecordSuccess(int64_t batch_size, const InferenceTimings& t, int64_t total_ns);
  void RecordFailure(int64_t total_ns);
  // One successful predictor run, however many requests it served.
  void RecordExecution() { execution_count_.fetch_add(1, std::memory_order_relaxed); }

  ModelStatsSnapshot Snapshot() const;

 private:
  void End();

  const std::string name_;
  const int64_t version_;
  std::atomic<int64_t> inflight_{0};
  std::atomic<uint64_t> last_inference_ms_{0};
  std::atomic<uint64_t> inference_count_{0};
  std::atomic<uint64_t> success_count_{0};
  std::atomic<uint64_t> execution_count_{0};
  std::atomic<uint64_t> success_ns_{0};
  std::atomic<uint64_t> fail_count_{0};
  std::atomic<uint64_t> fail_ns_{0};
  std::atomic<uint64_t> queue_ns_{0};
  std::atomic<uint64_t> compute_input_ns_{0};
  std::atomic<uint64_t> compute_infer_ns_{0};
  std::atomic<uint64_t> compute_output_ns_{0};
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_MODEL_STATS_H_
