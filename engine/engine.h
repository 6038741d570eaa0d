#ifndef NDSERVE_ENGINE_ENGINE_H_
#define NDSERVE_ENGINE_ENGINE_H_

// The engine's public face: what the server's inference, repository, health and
// statistics RPCs call. No gRPC or protobuf types; the server converts.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/host_tensor.h"
#include "engine/inference_request.h"
#include "engine/model_config.h"
#include "engine/model_stats.h"
#include "engine/repository.h"
#include "engine/served_model.h"
#include "engine/tensor_spec.h"
#include "memory/device.h"
#include "memory/memory_system.h"

namespace ndserve::engine {

struct EngineOptions {
  std::string model_repository;  // root of the Triton-style repository
  Device device;                 // where KIND_AUTO / KIND_GPU instances run (server: --device)
  bool warm_up = true;           // one zero-filled request per predictor at load
  // Not owned, may be null. Once it reads true, a warm-up in progress stops at its next
  // node (that load fails with CANCELLED) and LoadAllModels starts no further model: a
  // SIGTERM during start-up need not wait for every model to load.
  const std::atomic<bool>* stop_loading = nullptr;
};

enum class ModelState { kLoading, kReady, kUnloading, kUnavailable };
// "LOADING", "READY", "UNLOADING", "UNAVAILABLE" (Triton's repository index spelling).
absl::string_view ModelStateName(ModelState state);

// One row of the repository index.
struct ModelIndexEntry {
  std::string name;
  int64_t version = 0;  // 0 when no version is loaded
  ModelState state = ModelState::kUnavailable;
  std::string reason;  // why it is unavailable (the load error, as base/text.h SafeUtf8), or empty
};

// What KServe's ModelMetadata returns. Shapes include the batch dimension (-1) when
// max_batch_size > 0.
struct ModelMetadata {
  std::string name;
  std::vector<int64_t> versions;  // loaded versions, ascending
  std::string platform;           // "onnxruntime_onnx"
  int max_batch_size = 0;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

// Loads models from a repository and serves requests on them.
//
// Versions: a model's config.pbtxt version_policy picks the versions to load (default:
// the highest); a request names one version or 0 for the highest loaded. Loading a
// model that is already loaded reloads it: the new versions replace the old ones once
// they are ready; if the reload fails the old ones keep serving. A model whose load
// failed stays listed as UNAVAILABLE with the error; other models are not affected.
//
// Ownership: owns every ServedModel. Requests hold a model version alive while they run;
// unloading waits for them. Every model allocates from the MemorySystem given at
// construction (borrowed: it must outlive the engine; the engine touches no other
// memory system), so two engines on two memory systems share no pool and no limit.
// Thread-safe: Infer and the read-only calls from any thread, concurrently with loads
// and unloads (which are serialized among themselves).
class Engine {
 public:
  Engine(EngineOptions options, MemorySystem* memory);
  ~Engine();  // UnloadAllModels()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Loads (or reloads) `name` from the repository. INVALID_ARGUMENT for a bad name or
  // config, NOT_FOUND for a missing directory or file, UNIMPLEMENTED for an unsupported
  // op or opset, RESOURCE_EXHAUSTED from the pool; every message names the model.
  absl::Status LoadModel(absl::string_view name);
  // Stops serving `name`, waits for its requests in flight and frees its memory.
  // NOT_FOUND if it is not loaded.
  absl::Status UnloadModel(absl::string_view name);
  // Loads every model in the repository. A failing model does not stop the others; the
  // result lists every failure (OK if none).
  absl::Status LoadAllModels();
  void UnloadAllModels();

  // Runs one request. NOT_FOUND for an unknown model or version, UNAVAILABLE while it
  // loads or unloads, INVALID_ARGUMENT for a bad request, RESOURCE_EXHAUSTED from the
  // pool.
  absl::StatusOr<InferenceResponse> Infer(const InferenceRequest& request);
  // The same, asynchronously (ServedModel::InferAsync): `done` is called exactly once,
  // on this thread before returning or later on a dynamic batcher's thread, and
  // `request` must stay valid until then. A model that is unloaded while the request is
  // queued answers UNAVAILABLE.
  void InferAsync(const InferenceRequest& request, ServedModel::InferDone done);

  // `version` 0: the highest loaded.
  bool IsModelReady(absl::string_view name, int64_t version = 0) const;
  // True when every model that was asked to load (and not unloaded since) is ready.
  bool AllModelsReady() const;
  absl::StatusOr<ModelMetadata> GetModelMetadata(absl::string_view name, int64_t version = 0) const;
  // The effective config (config.pbtxt completed from the model).
  absl::StatusOr<ModelConfig> GetModelConfig(absl::string_view name, int64_t version = 0) const;
  // Every model in the repository and every loaded one, sorted by name then version.
  std::vector<ModelIndexEntry> RepositoryIndex(bool ready_only = false) const;
  // Statistics of the loaded versions; `name` empty: every model. NOT_FOUND for an
  // unknown model or version.
  absl::StatusOr<std::vector<ModelStatsSnapshot>> GetStatistics(absl::string_view name = {},
                                                                int64_t version = 0) const;
  // Publishes new parameter values of `name` as its next version (docs/design.md §4.1):
  // writes <repo>/<name>/<next>/model.onnx (next: one above the highest version
  // directory) from the file of the highest loaded version with `values` replacing
  // those initializers (onnx_writer.h), loads it with the model's config on the same
  // device, and switches to it atomically: a request that found the old version still
  // finishes on it, every later one runs on the new one. Under a `latest` version policy
  // the versions beyond the newest num_versions retire (ServedModel::Retire: they
  // unload once their requests are answered, and their memory goes back) before this
  // returns (a caller still holding a GetModel pointer to one delays that until it lets
  // go); under `all` they keep serving. Training scopes opened under a retired version
  // close with it. Returns the new version. NOT_FOUND if the
  // model is not loaded; FAILED_PRECONDITION under a `specific` policy (a restart would
  // not load the new version); the writer's INVALID_ARGUMENT for bad values; load
  // errors as LoadModel's. On failure the old versions serve on and no version
  // directory is left behind.
  absl::StatusOr<int64_t> PublishVersion(absl::string_view name,
                                         absl::Span<const HostTensor> values);

  // Every loaded version, sorted by name then version (per-model memory: metrics, admin).
  std::vector<std::shared_ptr<ServedModel>> LoadedModels() const;
  // The loaded version (0: highest), for tests and benchmarks that inspect it.
  absl::StatusOr<std::shared_ptr<ServedModel>> GetModel(absl::string_view name,
                                                        int64_t version = 0) const;

  const ModelRepository& repository() const { return repository_; }
  const EngineOptions& options() const { return options_; }
  MemorySystem* memory() const { return memory_; }

 private:
  struct Entry {
    std::map<int64_t, std::shared_ptr<ServedModel>> versions;
    ModelState state = ModelState::kUnavailable;
    std::string reason;
    bool wanted = false;  // asked to load and not unloaded since (counts for readiness)
  };

  absl::StatusOr<std::shared_ptr<ServedModel>> Find(absl::string_view name, int64_t version) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void SetState(const std::string& name, ModelState state, std::string reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const EngineOptions options_;
  MemorySystem* const memory_;
  const ModelRepository repository_;
  // Serializes loads and unloads (held across the slow part; Infer never takes it).
  absl::Mutex load_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_ENGINE_H_
