#include "server/inference_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/strings/str_cat.h"
#include "engine/dynamic_batcher.h"
#include "server/status_util.h"

namespace ndserve {
namespace {

// The reason label values (engine/dynamic_batcher.h), in VersionSeries::rejected order.
constexpr absl::string_view kRejectReasons[] = {engine::kRejectQueueFull, engine::kRejectTimeout,
                                                engine::kRejectDeadline, kRejectServerBusy};

std::string VersionKey(absl::string_view model, absl::string_view version) {
  return absl::StrCat(model, absl::string_view("\0", 1), version);
}

}  // namespace

const std::vector<double>& InferenceMetrics::DurationBuckets() {
  // 100 us to 1 min: a CPU MLP answers in well under a millisecond, a large model on a
  // cold GPU in seconds.
  static const std::vector<double> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                               1,      2.5,     5,      10,    30,     60};
  return kBuckets;
}

const std::vector<double>& InferenceMetrics::ContextBytesBuckets() {
  // Powers of four from 1 KiB to 16 GiB.
  static const std::vector<double> kBuckets = [] {
    std::vector<double> b;
    for (double v = 1024; v <= 16.0 * (1ull << 30); v *= 4) b.push_back(v);
    return b;
  }();
  return kBuckets;
}

InferenceMetrics::InferenceMetrics(prometheus::Registry* registry)
    : requests_(&prometheus::BuildCounter()
                     .Name("ndserve_inference_requests_total")
                     .Help("Inference requests finished, by model, version and gRPC status code.")
                     .Register(*registry)),
      rejected_(&prometheus::BuildCounter()
                     .Name("ndserve_inference_rejected_total")
                     .Help("Inference requests refused without running: queue_full (the "
                           "model's max_queue_size), timeout (its queue policy), deadline "
                           "(the client's) or server_busy (--max_pending_infer).")
                     .Register(*registry)),
      total_(&prometheus::BuildHistogram()
                  .Name("ndserve_inference_request_duration_seconds")
                  .Help("Time from a decoded request to its encoded response.")
                  .Register(*registry)),
      queue_(&prometheus::BuildHistogram()
                  .Name("ndserve_inference_queue_duration_seconds")
                  .Help("Time a request waited for a free predictor.")
                  .Register(*registry)),
      compute_(&prometheus::BuildHistogram()
                    .Name("ndserve_inference_compute_duration_seconds")
                    .Help("Time a request ran on its predictor, transfers included.")
                    .Register(*registry)),
      inflight_(&prometheus::BuildGauge()
                     .Name("ndserve_inference_inflight")
                     .Help("Inference requests being served right now.")
                     .Register(*registry)),
      loaded_(&prometheus::BuildGauge()
                   .Name("ndserve_model_loaded")
                   .Help("1 while a model version is loaded, 0 after it was unloaded.")
                   .Register(*registry)),
      context_peak_(&prometheus::BuildHistogram()
                         .Name("ndserve_request_context_peak_bytes")
                         .Help("Bytes one request's PredictorContext held at most.")
                         .Register(*registry)),
      host_request_bytes_(&prometheus::BuildGauge()
                               .Name("ndserve_host_request_bytes")
                               .Help("Host memory held by inference requests and responses in "
                                     "flight, outside the pools (--max_inflight_host_bytes).")
                               .Register(*registry)
                               .Add({})) {}

InferenceMetrics::~InferenceMetrics() = default;

absl::string_view InferenceMetrics::Known(absl::string_view model) const {
  return models_.contains(model) ? model : absl::string_view(kUnknownModel);
}

InferenceMetrics::ModelSeries* InferenceMetrics::GetModelLocked(const std::string& model) {
  std::unique_ptr<ModelSeries>& slot = models_[model];
  if (slot == nullptr) {
    slot = std::make_unique<ModelSeries>();
    slot->inflight = &inflight_->Add({{"model", model}});
    slot->context_peak = &context_peak_->Add(
        {{"model", model}}, prometheus::Histogram::BucketBoundaries(ContextBytesBuckets()));
  }
  return slot.get();
}

InferenceMetrics::ModelSeries* InferenceMetrics::GetModel(absl::string_view model) {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (auto it = models_.find(model); it != models_.end()) return it->second.get();
  }
  absl::MutexLock lock(&mu_);
  return GetModelLocked(std::string(kUnknownModel));
}

InferenceMetrics::VersionSeries* InferenceMetrics::GetVersion(absl::string_view model,
                                                              absl::string_view version) {
  std::string key;
  {
    absl::ReaderMutexLock lock(&mu_);
    const absl::string_view labelled = Known(model);
    if (labelled != model || !loaded_series_.contains(VersionKey(model, version))) version = "";
    key = VersionKey(labelled, version);
    if (auto it = versions_.find(key); it != versions_.end()) return it->second.get();
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<VersionSeries>& slot = versions_[key];
  if (slot == nullptr) {
    slot = std::make_unique<VersionSeries>();
    slot->model = key.substr(0, key.find('\0'));
    slot->version = key.substr(key.find('\0') + 1);
    const prometheus::Labels labels = {{"model", slot->model}, {"version", slot->version}};
    const prometheus::Histogram::BucketBoundaries buckets(DurationBuckets());
    slot->total = &total_->Add(labels, buckets);
    slot->queue = &queue_->Add(labels, buckets);
    slot->compute = &compute_->Add(labels, buckets);
  }
  return slot.get();
}

prometheus::Counter* InferenceMetrics::GetRequestCounter(VersionSeries* series, int code) {
  if (prometheus::Counter* c = series->requests[code].load(std::memory_order_acquire)) return c;
  absl::MutexLock lock(&mu_);
  prometheus::Counter* c = series->requests[code].load(std::memory_order_relaxed);
  if (c == nullptr) {
    c = &requests_->Add(
        {{"model", series->model},
         {"version", series->version},
         {"code", std::string(StatusCodeName(static_cast<absl::StatusCode>(code)))}});
    series->requests[code].store(c, std::memory_order_release);
  }
  return c;
}

prometheus::Counter* InferenceMetrics::GetRejectedCounter(VersionSeries* series,
                                                          absl::string_view reason) {
  size_t i = 0;
  while (i < std::size(kRejectReasons) && kRejectReasons[i] != reason) ++i;
  if (i == std::size(kRejectReasons)) return nullptr;
  if (prometheus::Counter* c = series->rejected[i].load(std::memory_order_acquire)) return c;
  absl::MutexLock lock(&mu_);
  prometheus::Counter* c = series->rejected[i].load(std::memory_order_relaxed);
  if (c == nullptr) {
    c = &rejected_->Add({{"model", series->model},
                         {"version", series->version},
                         {"reason", std::string(kRejectReasons[i])}});
    series->rejected[i].store(c, std::memory_order_release);
  }
  return c;
}

void InferenceMetrics::ModelLoaded(absl::string_view model, absl::string_view version) {
  absl::MutexLock lock(&mu_);
  GetModelLocked(std::string(model));
  prometheus::Gauge*& gauge = loaded_series_[VersionKey(model, version)];
  if (gauge == nullptr) {
    gauge = &loaded_->Add({{"model", std::string(model)}, {"version", std::string(version)}});
  }
  gauge->Set(1);
}

void InferenceMetrics::ModelUnloaded(absl::string_view model, absl::string_view version) {
  absl::MutexLock lock(&mu_);
  if (auto it = loaded_series_.find(VersionKey(model, version)); it != loaded_series_.end()) {
    it->second->Set(0);
  }
}

InferenceMetrics::InflightScope::InflightScope(prometheus::Gauge* gauge) : gauge_(gauge) {
  gauge_->Increment();
}

InferenceMetrics::InflightScope::~InflightScope() {
  if (gauge_ != nullptr) gauge_->Decrement();
}

InferenceMetrics::InflightScope InferenceMetrics::TrackInflight(absl::string_view model) {
  return InflightScope(GetModel(model)->inflight);
}

void InferenceMetrics::RecordRequest(const Request& request) {
  VersionSeries* series = GetVersion(request.model, request.version);
  int code = static_cast<int>(request.code);
  if (code < 0 || code >= kCodes) code = static_cast<int>(absl::StatusCode::kUnknown);
  GetRequestCounter(series, code)->Increment();
  if (!request.rejected_reason.empty()) {
    if (prometheus::Counter* c = GetRejectedCounter(series, request.rejected_reason)) c->Increment();
  }
  series->total->Observe(request.total_seconds);
  if (request.queue_seconds) series->queue->Observe(*request.queue_seconds);
  if (request.compute_seconds) series->compute->Observe(*request.compute_seconds);
  if (request.context_peak_bytes) {
    GetModel(request.model)
        ->context_peak->Observe(static_cast<double>(*request.context_peak_bytes));
  }
}

}  // namespace ndserve
