#ifndef NDSERVE_SERVER_MODEL_LIFECYCLE_H_
#define NDSERVE_SERVER_MODEL_LIFECYCLE_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ndserve {

namespace engine {
class Engine;
}  // namespace engine
class InferenceMetrics;

// Loads and unloads models on the engine and keeps ndserve_model_loaded{model,version}
// in step with what the engine serves, logging one line per change. main.cc uses it for
// the start-up load and the shutdown unload, the inference service for
// RepositoryModelLoad / RepositoryModelUnload, so both paths report alike.
//
// Uses `engine` and `metrics` (not owned; both must outlive it). Thread-safe: changes
// are serialized so that the metrics follow the engine's order of events.
class ModelLifecycle {
 public:
  ModelLifecycle(engine::Engine* engine, InferenceMetrics* metrics)
      : engine_(engine), metrics_(metrics) {}
  ModelLifecycle(const ModelLifecycle&) = delete;
  ModelLifecycle& operator=(const ModelLifecycle&) = delete;

  // Loads (or reloads) one model; the engine's error otherwise.
  absl::Status Load(absl::string_view name) ABSL_LOCKS_EXCLUDED(mu_);
  // Unloads one model (waiting for its requests in flight); NOT_FOUND if not loaded.
  absl::Status Unload(absl::string_view name) ABSL_LOCKS_EXCLUDED(mu_);
  // Every model of the repository; a failing model does not stop the others. Returns
  // the failures (OK if none), each already logged.
  absl::Status LoadAll() ABSL_LOCKS_EXCLUDED(mu_);
  void UnloadAll() ABSL_LOCKS_EXCLUDED(mu_);

  engine::Engine* engine() const { return engine_; }

 private:
  // The versions of `name` the engine serves now (empty if none).
  std::vector<int64_t> LoadedVersions(absl::string_view name) const;
  // Moves the metrics of `name` from `before` to the versions loaded now.
  void Announce(absl::string_view name, const std::vector<int64_t>& before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  engine::Engine* const engine_;
  InferenceMetrics* const metrics_;
  absl::Mutex mu_;
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_MODEL_LIFECYCLE_H_
