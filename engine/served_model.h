#ifndef NDSERVE_ENGINE_SERVED_MODEL_H_
#define NDSERVE_ENGINE_SERVED_MODEL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/dynamic_batcher.h"
#include "engine/inference_request.h"
#include "engine/instance_placement.h"
#include "engine/model.h"
#include "engine/model_config.h"
#include "engine/model_memory.h"
#include "engine/model_stats.h"
#include "engine/predictor_pool.h"
#include "memory/device.h"
#include "memory/memory_system.h"

namespace ndserve::engine {

// What to load: one version of one model onto one device, or onto several.
struct ModelLoadSpec {
  std::string name;
  int64_t version = 1;
  std::string model_path;             // the .onnx file
  std::optional<ModelConfig> config;  // config.pbtxt, if the model has one
  Device device;
  int instance_count = 0;  // predictors; 0: the config's instance_group count (default 1)
  // Predictors per device (PlaceInstances); when set, `device` and `instance_count` are
  // ignored and each listed device gets its own copy of the parameters.
  std::vector<InstancePlacement> placements;
  bool warm_up = true;
  const std::atomic<bool>* stop_warm_up = nullptr;  // EngineOptions::stop_loading
};

// One loaded model version: a Model (parameters, capped) per device it is placed on, its
// predictors behind one PredictorPool, and its statistics. This is what Engine keeps per
// version.
//
// Ownership: owns the Models (each shared with its device's predictors) and the pool.
// Unload (or the destructor) drains the pool, waiting for requests in flight, and closes
// the model managers, which frees the parameters on every device. Thread-safe: Infer from any number of threads.
class ServedModel {
 public:
  // Parse -> check ops and opset -> reconcile with config -> upload initializers -> cap
  // the model manager -> create predictors -> warm up -> cap their managers
  // (docs/design.md §4). Parameters and requests allocate from `memory` (borrowed; it must
  // outlive the ServedModel). Errors name the model, version and file; nothing stays
  // allocated.
  static absl::StatusOr<std::shared_ptr<ServedModel>> Load(const ModelLoadSpec& spec,
                                                           MemorySystem* memory);
  ~ServedModel();
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;

  using InferDone = absl::AnyInvocable<void(absl::StatusOr<InferenceResponse>)>;

  // Validates the request (INVALID_ARGUMENT naming the tensor) and hands it to the
  // DynamicBatcher, which every model has: a request that finds a predictor free and
  // nothing queued runs on this thread and `done` is called before this returns;
  // otherwise this returns at once and `done` runs later on a batcher thread. With
  // `dynamic_batching` in the config (and a batch dimension) the request may be merged
  // with compatible ones and the queue policy applies (UNAVAILABLE when the queue is
  // full, DEADLINE_EXCEEDED when its timeout passed before it ran); without, it runs
  // alone. Either way a request whose `request.deadline` passed while it was queued
  // never runs (DEADLINE_EXCEEDED). UNAVAILABLE once unloading; the pool's
  // RESOURCE_EXHAUSTED passes through. `request` must stay valid until `done` is
  // called; `done` is called exactly once.
  void InferAsync(const InferenceRequest& request, InferDone done);

  // InferAsync, waiting for its result.
  absl::StatusOr<InferenceResponse> Infer(const InferenceRequest& request);

  // Stops taking requests, waits for those in flight, closes the model manager.
  // Idempotent.
  void Unload();

  // Unloads a version the engine no longer routes to (a published version replaced it,
  // docs/design.md §4.1) without failing anyone: waits until nobody else holds `model`
  // (a request that found this version just before the switch still gets in) and every
  // request it took has been answered, queued ones included, then Unload()s it, which
  // returns its memory to the pool. The caller hands in its reference. Requests are
  // answered at their own pace, so this waits as long as the slowest of them.
  static void Retire(std::shared_ptr<ServedModel> model);

  const std::string& name() const { return model_->name(); }
  int64_t version() const { return model_->version(); }
  // The first device the model is placed on (the only one unless its instance groups
  // list several); devices() lists them all.
  Device device() const { return model_->device(); }
  std::vector<Device> devices() const;
  const ModelSignature& signature() const { return model_->signature(); }
  const ModelConfig& config() const { return model_->config(); }
  // The Model on device(); the others differ only in where their parameters live.
  const Model& model() const { return *model_; }
  const PredictorPool& predictors() const { return *pool_; }
  bool dynamic_batching() const { return dynamic_batching_; }
  // The batcher, for inspection (tests); every model has one.
  const DynamicBatcher* batcher() const { return batcher_.get(); }
  // Tests only: DynamicBatcher::SetBeforeRunForTesting.
  void SetBeforeRunForTesting(std::function<void(const InferenceRequest&)> before_run) {
    batcher_->SetBeforeRunForTesting(std::move(before_run));
  }
  ModelStatsSnapshot stats() const { return stats_.Snapshot(); }
  // The file this version was loaded from (what a published version is written from).
  const std::string& model_path() const { return model_path_; }
  // The bytes this version holds now, per device and kind, summed from its manager tree
  // (a walk over its arrays: for stats, scrapes and admin, not for the request path).
  // Empty once unloaded.
  std::vector<ModelMemoryUsage> MemoryUsage() const;

 private:
  ServedModel(std::vector<std::shared_ptr<Model>> models, std::unique_ptr<PredictorPool> pool);

  const std::vector<std::shared_ptr<Model>> models_;  // one per device, in placement order
  const std::shared_ptr<Model> model_;                // models_.front()
  std::unique_ptr<PredictorPool> pool_;
  const bool dynamic_batching_;  // the config merges requests
  std::unique_ptr<DynamicBatcher> batcher_;
  ModelStats stats_;
  std::atomic<bool> unloaded_{false};
  std::string model_path_;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_SERVED_MODEL_H_
