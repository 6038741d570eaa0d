#ifndef NDSERVE_SERVER_TRAINER_METRICS_H_
#define NDSERVE_SERVER_TRAINER_METRICS_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/prometheus_fwd.h"

namespace ndserve {

// The Trainer service's families (docs/design.md §10.1): ndserve_train_steps_total,
// ndserve_train_loss and ndserve_train_step_duration_seconds, labelled by model. A
// model label is only ever a loaded model's name (a session needs one), so the series
// stay bounded. Registers on the exporter's registry (borrowed). Thread-safe.
class TrainerMetrics {
 public:
  explicit TrainerMetrics(prometheus::Registry* registry);
  ~TrainerMetrics();

  // One finished step of a session on `model`.
  void RecordStep(absl::string_view model, float loss, absl::Duration duration);

 private:
  struct Series {
    prometheus::Counter* steps = nullptr;
    prometheus::Gauge* loss = nullptr;
    prometheus::Histogram* duration = nullptr;
  };
  Series* Get(absl::string_view model);

  prometheus::Family<prometheus::Counter>* steps_;
  prometheus::Family<prometheus::Gauge>* loss_;
  prometheus::Family<prometheus::Histogram>* duration_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Series>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_TRAINER_METRICS_H_
