#ifndef NDSERVE_SERVER_METRICS_EXPORTER_H_
#define NDSERVE_SERVER_METRICS_EXPORTER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "server/inference_metrics.h"
#include "server/memory_collector.h"
#include "server/prometheus_fwd.h"
#include "server/trainer_metrics.h"

namespace ndserve {

class DevicePools;

// Serves Prometheus text at http://<address>/metrics (prometheus-cpp's pull exposer):
// the memory and manager families built at scrape time by a MemoryCollector, and the
// inference families that the inference service records through inference().
//
// Idle or slow HTTP clients cannot take /metrics offline: the listener has many threads
// and drops a connection that has not sent its request within 2 s (docs/design.md §7).
//
// Reads `pools` (not owned; must outlive this object). Owns its registry, collector and
// HTTP listener. inference() and Text() are thread-safe; Start and Stop are called from
// one thread (main).
class MetricsExporter {
 public:
  explicit MetricsExporter(const DevicePools* pools, ManagerLevelSource managers = {});
  ~MetricsExporter();
  MetricsExporter(const MetricsExporter&) = delete;
  MetricsExporter& operator=(const MetricsExporter&) = delete;

  // Binds "host:port" (port 0: any free port). UNAVAILABLE naming --metrics_address
  // when the address cannot be bound.
  absl::Status Start(const std::string& address);
  // Closes the listener (within milliseconds for an IPv4 address); scrapes in progress
  // finish first.
  void Stop();
  // The bound port after Start, else 0.
  int port() const { return port_; }

  // Before Start: serves the HTML `render` returns at `path` (e.g. "/memory", the memory
  // map) on the same listener, through civetweb's begin_request hook. `render` runs on
  // the listener's threads, concurrently; it must be thread-safe.
  void AddHtmlPage(std::string path, std::function<std::string()> render);

  // Exactly the body /metrics serves.
  std::string Text() const;

  InferenceMetrics& inference() { return *inference_; }
  TrainerMetrics& trainer() { return *trainer_; }
  // See MemoryCollector::SetModelSource. Thread-safe.
  void SetModelMemorySource(ModelMemorySource models) { memory_->SetModelSource(std::move(models)); }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<MemoryCollector> memory_;
  std::unique_ptr<InferenceMetrics> inference_;
  std::unique_ptr<TrainerMetrics> trainer_;
  std::map<std::string, std::function<std::string()>> pages_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
  int port_ = 0;
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_METRICS_EXPORTER_H_
