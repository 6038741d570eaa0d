#ifndef NDSERVE_SERVER_INFERENCE_METRICS_H_
#define NDSERVE_SERVER_INFERENCE_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/prometheus_fwd.h"

namespace ndserve {

// The per-request and per-model families of docs/design.md §7, recorded by the inference
// service and the model repository; the only place they touch prometheus-cpp:
//   ndserve_inference_requests_total{model,version,code}
//   ndserve_inference_rejected_total{model,version,reason}      (refused without running)
//   ndserve_inference_request_duration_seconds{model,version}   (histogram)
//   ndserve_inference_queue_duration_seconds{model,version}     (histogram)
//   ndserve_inference_compute_duration_seconds{model,version}   (histogram)
//   ndserve_inference_inflight{model}
//   ndserve_model_loaded{model,version}
//   ndserve_request_context_peak_bytes{model}                   (histogram)
//   ndserve_host_request_bytes                                  (HostMemoryBudget's gauge)
//
// Label cardinality is bounded by the repository, not by clients: a model name that
// was never announced with ModelLoaded() is recorded as model="_unknown", and a version
// of a known model that was never announced as version="", so requests naming random
// models or versions cannot grow the series without limit. Record the version the
// request resolved to (the highest loaded when it asked for none).
//
// The families live in the Registry given at construction, which must outlive this
// object. Series handles are cached per (model, version), so recording a request
// costs a reader lock, a hash lookup and a few atomic adds. Thread-safe.
// The reject reason of a ModelInfer call the server refused before decoding it (too many
// calls waiting for a worker); the engine's reasons are in engine/dynamic_batcher.h.
inline constexpr absl::string_view kRejectServerBusy = "server_busy";

class InferenceMetrics {
 public:
  static constexpr char kUnknownModel[] = "_unknown";

  // Everything one finished request reports.
  struct Request {
    absl::string_view model;
    absl::string_view version;
    absl::StatusCode code = absl::StatusCode::kOk;
    // From the decoded request to the encoded response.
    double total_seconds = 0;
    // Waiting for a free predictor; unset when the request never reached a queue
    // (e.g. it failed to decode).
    std::optional<double> queue_seconds;
    // On the predictor, uploads and downloads included; unset as above.
    std::optional<double> compute_seconds;
    // Bytes the request's PredictorContext held at most; unset as above.
    std::optional<std::uint64_t> context_peak_bytes;
    // Why the request was refused without running (engine::RejectReason: queue_full,
    // timeout, deadline; or kRejectServerBusy); empty when it was not.
    absl::string_view rejected_reason;
  };

  explicit InferenceMetrics(prometheus::Registry* registry);
  ~InferenceMetrics();
  InferenceMetrics(const InferenceMetrics&) = delete;
  InferenceMetrics& operator=(const InferenceMetrics&) = delete;

  // The repository reports every version it loads and unloads. A loaded model reads
  // 1, an unloaded one 0 (the series stays, so dashboards see the unload).
  void ModelLoaded(absl::string_view model, absl::string_view version);
  void ModelUnloaded(absl::string_view model, absl::string_view version);

  // Counts one request in ndserve_inference_inflight{model} for as long as it lives.
  class InflightScope {
   public:
    InflightScope(InflightScope&& other) noexcept : gauge_(other.gauge_) { other.gauge_ = nullptr; }
    InflightScope& operator=(InflightScope&&) = delete;
    ~InflightScope();

   private:
    friend class InferenceMetrics;
    explicit InflightScope(prometheus::Gauge* gauge);
    prometheus::Gauge* gauge_;
  };
  [[nodiscard]] InflightScope TrackInflight(absl::string_view model);

  void RecordRequest(const Request& request);

  // Host bytes held by inference requests and responses in flight; the inference
  // service's HostMemoryBudget moves it.
  prometheus::Gauge* host_request_bytes() const { return host_request_bytes_; }

  // Bucket upper bounds, exposed for tests and dashboards.
  static const std::vector<double>& DurationBuckets();
  static const std::vector<double>& ContextBytesBuckets();

 private:
  static constexpr int kCodes = 17;  // canonical status codes 0..16

  // Handles of one (model, version)'s series; created once, never freed before the
  // registry.
  struct VersionSeries {
    // One counter per status code, made when that code first occurs, so an idle model
    // exports one series per code it actually returned rather than seventeen.
    std::array<std::atomic<prometheus::Counter*>, kCodes> requests{};
    std::string model;
    std::string version;
    prometheus::Histogram* total = nullptr;
    prometheus::Histogram* queue = nullptr;
    prometheus::Histogram* compute = nullptr;
    // One per reject reason (kRejectReasons' order), made on first use as above.
    std::array<std::atomic<prometheus::Counter*>, 4> rejected{};
  };
  struct ModelSeries {
    prometheus::Gauge* inflight = nullptr;
    prometheus::Histogram* context_peak = nullptr;
  };

  VersionSeries* GetVersion(absl::string_view model, absl::string_view version);
  prometheus::Counter* GetRequestCounter(VersionSeries* series, int code);
  // Null for a reason outside the known set.
  prometheus::Counter* GetRejectedCounter(VersionSeries* series, absl::string_view reason);
  ModelSeries* GetModel(absl::string_view model) ABSL_LOCKS_EXCLUDED(mu_);
  ModelSeries* GetModelLocked(const std::string& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The model name as labelled: itself when announced, kUnknownModel otherwise.
  absl::string_view Known(absl::string_view model) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* rejected_;
  prometheus::Family<prometheus::Histogram>* total_;
  prometheus::Family<prometheus::Histogram>* queue_;
  prometheus::Family<prometheus::Histogram>* compute_;
  prometheus::Family<prometheus::Gauge>* inflight_;
  prometheus::Family<prometheus::Gauge>* loaded_;
  prometheus::Family<prometheus::Histogram>* context_peak_;
  prometheus::Gauge* host_request_bytes_;

  mutable absl::Mutex mu_;
  // Key: model + '\0' + version.
  absl::flat_hash_map<std::string, std::unique_ptr<VersionSeries>> versions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<ModelSeries>> models_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, prometheus::Gauge*> loaded_series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_INFERENCE_METRICS_H_
