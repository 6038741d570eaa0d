#include "engine/served_model.h"

#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/logging.h"
#include "engine/onnx_loader.h"
#include "engine/signature.h"
#include "base/status_macros.h"
#include "memory/pool_stats.h"

namespace ndserve::engine {
namespace {

absl::StatusOr<std::shared_ptr<ServedModel>> Fail(const ModelLoadSpec& spec,
                                                  const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("failed to load model '", spec.name, "' version ",
                                                  spec.version, ": ", status.message()));
}

uint64_t ParameterBytes(const std::vector<std::shared_ptr<Model>>& models) {
  uint64_t total = 0;
  for (const std::shared_ptr<Model>& m : models) total += m->parameter_bytes();
  return total;
}

std::string DeviceList(const std::vector<InstancePlacement>& placements) {
  std::string out;
  for (const InstancePlacement& p : placements) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", p.device.ToString());
  }
  return out;
}

}  // namespace

ServedModel::ServedModel(std::vector<std::shared_ptr<Model>> models,
                         std::unique_ptr<PredictorPool> pool)
    : models_(std::move(models)),
      model_(models_.front()),
      pool_(std::move(pool)),
      dynamic_batching_(model_->config().dynamic_batching.has_value() &&
                        model_->config().max_batch_size > 0),
      stats_(model_->name(), model_->version()) {
  const ModelConfig& config = model_->config();
  // Every model queues in a batcher, so that a request waiting for a busy predictor holds
  // no caller's thread (docs/design.md §6); without dynamic batching nothing merges.
  DynamicBatcher::Options options;
  if (dynamic_batching_) {
    options.max_batch_size = config.max_batch_size;
    options.max_queue_delay =
        absl::Microseconds(config.dynamic_batching->max_queue_delay_microseconds);
    options.queue_policy = config.dynamic_batching->default_queue_policy;
    options.priority_levels = config.dynamic_batching->priority_levels;
    options.default_priority_level = config.dynamic_batching->default_priority_level;
    options.priority_queue_policy = config.dynamic_batching->priority_queue_policy;
    bool on_gpu = false;
    for (const std::shared_ptr<Model>& m : models_) on_gpu = on_gpu || m->device().is_cuda();
    options.pad_to_power_of_two = config.pad_batches.value_or(on_gpu && config.cuda_graphs);
  } else {
    options.max_batch_size = 0;
  }
  batcher_ = std::make_unique<DynamicBatcher>(pool_.get(), std::move(options));
}

ServedModel::~ServedModel() { Unload(); }

std::vector<ModelMemoryUsage> ServedModel::MemoryUsage() const {
  std::vector<ModelMemoryUsage> out;
  for (const std::shared_ptr<Model>& m : models_) {
    std::vector<ModelMemoryUsage> one = SumModelMemory(m->manager()->DebugInfo());
    out.insert(out.end(), one.begin(), one.end());
  }
  return out;
}

std::vector<Device> ServedModel::devices() const {
  std::vector<Device> out;
  for (const std::shared_ptr<Model>& m : models_) out.push_back(m->device());
  return out;
}

absl::StatusOr<std::shared_ptr<ServedModel>> ServedModel::Load(const ModelLoadSpec& spec,
                                                               MemorySystem* memory) {
  const absl::Time start = absl::Now();
  absl::StatusOr<Graph> graph = LoadOnnxGraph(spec.model_path);
  if (!graph.ok()) return Fail(spec, graph.status());
  const ModelConfig* config = spec.config ? &*spec.config : nullptr;
  absl::StatusOr<ModelSignature> signature = ResolveSignature(*graph, config);
  if (!signature.ok()) return Fail(spec, signature.status());
  ModelConfig effective = EffectiveConfig(*signature, config, spec.name);
  const size_t num_nodes = graph->nodes().size();
  std::vector<InstancePlacement> placements = spec.placements;
  if (placements.empty()) {
    placements.push_back(
        {spec.device, spec.instance_count > 0 ? spec.instance_count : effective.InstanceCount()});
  }

  // One Model per device, each uploading its own parameters (Model::Create releases the
  // graph's host copies of them, so every device but the last gets a copy of the graph).
  std::vector<std::shared_ptr<Model>> models;
  std::vector<std::unique_ptr<Predictor>> predictors;
  auto fail = [&](const absl::Status& status) {
    predictors.clear();
    for (const std::shared_ptr<Model>& m : models) m->Close().IgnoreError();
    return Fail(spec, status);
  };
  for (size_t d = 0; d < placements.size(); ++d) {
    const bool last = d + 1 == placements.size();
    absl::StatusOr<std::shared_ptr<Model>> model = Model::Create(
        spec.name, spec.version, last ? *std::move(graph) : *graph,
        last ? *std::move(signature) : *signature, last ? std::move(effective) : effective,
        placements[d].device, memory);
    if (!model.ok()) return fail(model.status());
    models.push_back(*model);
    for (int i = 0; i < placements[d].count; ++i) {
      // Indices run on across devices, so every predictor's manager name is unique.
      absl::StatusOr<std::unique_ptr<Predictor>> p =
          Predictor::Create(*model, static_cast<int>(predictors.size()));
      absl::Status status = p.status();
      if (status.ok() && spec.warm_up) status = (*p)->WarmUp(spec.stop_warm_up);
      if (!status.ok()) return fail(status);
      predictors.push_back(*std::move(p));
    }
  }
  const int count = static_cast<int>(predictors.size());
  std::shared_ptr<ServedModel> served(
      new ServedModel(models, std::make_unique<PredictorPool>(std::move(predictors))));
  served->model_path_ = spec.model_path;
  LOG(INFO) << absl::StrFormat(
      "loaded model '%s' version %d from %s on %s: %d nodes, %s of parameters, %d predictor%s%s, "
      "%.0f ms",
      spec.name, spec.version, spec.model_path, DeviceList(placements), num_nodes,
      FormatBytes(ParameterBytes(models)), count, count == 1 ? "" : "s",
      served->dynamic_batching_
          ? absl::StrCat(", dynamic batching up to ", served->config().max_batch_size, " rows")
          : std::string(),
      absl::ToDoubleMilliseconds(absl::Now() - start));
  return served;
}

void ServedModel::InferAsync(const InferenceRequest& request, InferDone done) {
  const absl::Time start = absl::Now();
  stats_.Begin();
  auto fail = [this, start](const absl::Status& status) {
    stats_.RecordFailure(absl::ToInt64Nanoseconds(absl::Now() - start));
    return status;
  };
  absl::StatusOr<ValidatedRequest> plan = ValidateRequest(model_->signature(), request);
  if (!plan.ok()) return done(fail(plan.status()));
  // The batcher's lanes are joined before this object goes (Unload), so `this` outlives
  // the callback.
  batcher_->Enqueue(request, *plan,
                    [this, start, fail, rows = plan->batch_size,
                     done = std::move(done)](DynamicBatcher::Outcome outcome) mutable {
                      if (!outcome.response.ok()) return done(fail(outcome.response.status()));
                      if (outcome.executed) stats_.RecordExecution();
                      stats_.RecordSuccess(rows, outcome.response->timings,
                                           absl::ToInt64Nanoseconds(absl::Now() - start));
                      done(std::move(outcome.response));
                    });
}

absl::StatusOr<InferenceResponse> ServedModel::Infer(const InferenceRequest& request) {
  // Shared with the callback, which may still be unlocking when this thread wakes.
  struct Waiter {
    absl::Mutex mu;
    std::optional<absl::StatusOr<InferenceResponse>> result ABSL_GUARDED_BY(mu);
  };
  auto waiter = std::make_shared<Waiter>();
  InferAsync(request, [waiter](absl::StatusOr<InferenceResponse> result) {
    absl::MutexLock lock(&waiter->mu);
    waiter->result = std::move(result);
  });
  absl::MutexLock lock(&waiter->mu);
  waiter->mu.Await(absl::Condition(
      +[](std::optional<absl::StatusOr<InferenceResponse>>* r) { return r->has_value(); },
      &waiter->result));
  return *std::move(waiter->result);
}

void ServedModel::Retire(std::shared_ptr<ServedModel> model) {
  if (model == nullptr) return;
  // Polled, not signalled: a reference count has no waiters, and a retirement happens
  // once per published version, so a millisecond's sleep costs nothing anyone sees.
  // First the holders (requests between the engine's lookup and InferAsync), then the
  // requests they queued or are running.
  for (;;) {
    if (model.use_count() == 1) {
      // Pairs with the release of the last other reference: the Begin() of every request
      // its holder started is visible below.
      std::atomic_thread_fence(std::memory_order_acquire);
      if (model->stats_.Snapshot().inflight == 0) break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  model->Unload();
}

void ServedModel::Unload() {
  if (unloaded_.exchange(true)) {
    // A concurrent first call may still be draining: wait for it too.
    batcher_->Shutdown();
    pool_->Drain();
    return;
  }
  // Queued requests fail with UNAVAILABLE; running batches finish first.
  batcher_->Shutdown();
  pool_->Drain();
  absl::Status status;
  for (const std::shared_ptr<Model>& m : models_) status.Update(m->Close());
  if (!status.ok()) {
    LOG(ERROR) << "unloading model '" << name() << "' version " << version() << ": " << status;
    return;
  }
  const ModelStatsSnapshot s = stats_.Snapshot();
  const DynamicBatcher::Stats runs = batcher_->stats();
  LOG(INFO) << absl::StrFormat(
      "unloaded model '%s' version %d: freed %s of parameters after %d "
      "requests (%d failed) in %d predictor runs (%d on callers' threads, %d on lanes)",
      name(), version(), FormatBytes(ParameterBytes(models_)), s.success_count + s.fail_count,
      s.fail_count, s.execution_count, runs.caller_runs, runs.lane_runs);
}

}  // namespace ndserve::engine
