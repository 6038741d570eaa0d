#include "server/trainer_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <vector>

namespace ndserve {
namespace {

const std::vector<double>& StepBuckets() {
  // 100 us to 1 min: an MLP step on a small batch takes well under a millisecond, a
  // recsys step at batch 256 tens of milliseconds, a large model seconds.
  static const std::vector<double> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                               1,      2.5,     5,      10,    30,     60};
  return kBuckets;
}

}  // namespace

TrainerMetrics::TrainerMetrics(prometheus::Registry* registry)
    : steps_(&prometheus::BuildCounter()
                  .Name("ndserve_train_steps_total")
                  .Help("Training steps finished by the Trainer service, by model.")
                  .Register(*registry)),
      loss_(&prometheus::BuildGauge()
                 .Name("ndserve_train_loss")
                 .Help("Loss of the latest training step, by model.")
                 .Register(*registry)),
      duration_(&prometheus::BuildHistogram()
                     .Name("ndserve_train_step_duration_seconds")
                     .Help("Time of one training step (upload, forward, backward, update).")
                     .Register(*registry)) {}

TrainerMetrics::~TrainerMetrics() = default;

TrainerMetrics::Series* TrainerMetrics::Get(absl::string_view model) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Series>& slot = models_[model];
  if (slot == nullptr) {
    slot = std::make_unique<Series>();
    const prometheus::Labels labels = {{"model", std::string(model)}};
    slot->steps = &steps_->Add(labels);
    slot->loss = &loss_->Add(labels);
    slot->duration =
        &duration_->Add(labels, prometheus::Histogram::BucketBoundaries(StepBuckets()));
  }
  return slot.get();
}

void TrainerMetrics::RecordStep(absl::string_view model, float loss, absl::Duration duration) {
  Series* series = Get(model);
  series->steps->Increment();
  series->loss->Set(loss);
  series->duration->Observe(absl::ToDoubleSeconds(duration));
}

}  // namespace ndserve
