#include "engine/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "base/text.h"
#include "engine/instance_placement.h"
#include "memory/cuda_runtime.h"

namespace ndserve::engine {
namespace {

// Every load error says which model failed, whichever step it came from, so that the
// log line and the RepositoryModelLoad reply stand on their own.
absl::Status ModelLoadError(absl::string_view name, const absl::Status& cause) {
  return absl::Status(cause.code(),
                      absl::StrCat("failed to load model '", name, "': ", cause.message()));
}

// What a load of one repository model brings up: the versions its policy selects, with
// predictors where its instance groups put them.
struct VersionsToLoad {
  std::vector<ModelVersionLocation> versions;
  std::vector<InstancePlacement> placements;
};

absl::StatusOr<VersionsToLoad> SelectVersionsToLoad(const RepositoryModel& model,
                                                    Device engine_device) {
  const VersionPolicy policy =
      model.config.has_value() ? model.config->version_policy : VersionPolicy();
  VersionsToLoad plan;
  NDS_ASSIGN_OR_RETURN(plan.versions, ModelRepository::SelectVersions(model, policy));
  const std::vector<InstanceGroupConfig> no_groups;
  NDS_ASSIGN_OR_RETURN(
      plan.placements,
      PlaceInstances(model.config.has_value() ? model.config->instance_groups : no_groups,
                     // Probed only for a GPU daemon: a CPU daemon makes no CUDA call.
                     engine_device.is_cuda() ? CudaDeviceCount() : 0, engine_device));
  return plan;
}

}  // namespace

absl::string_view ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kUnloading:
      return "UNLOADING";
    case ModelState::kUnavailable:
      return "UNAVAILABLE";
  }
  return "UNAVAILABLE";
}

Engine::Engine(EngineOptions options, MemorySystem* memory)
    : options_(std::move(options)), memory_(memory), repository_(options_.model_repository) {}

Engine::~Engine() { UnloadAllModels(); }

void Engine::SetState(const std::string& name, ModelState state, std::string reason) {
  Entry& e = models_[name];
  e.state = state;
  e.reason = std::move(reason);
}

absl::Status Engine::LoadModel(absl::string_view name) {
  absl::MutexLock load_lock(&load_mu_);
  NDS_RETURN_IF_ERROR(ValidateModelName(name));
  const std::string key(name);
  {
    absl::MutexLock lock(&mu_);
    Entry& e = models_[key];
    e.wanted = true;
    if (e.versions.empty()) e.state = ModelState::kLoading;
  }
  auto failed = [&](const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    // A failed reload leaves the old versions serving.
    if (auto it = models_.find(key); it != models_.end() && it->second.versions.empty()) {
      it->second.state = ModelState::kUnavailable;
      // Clients read the reason (RepositoryIndex): a config.pbtxt byte that is not UTF-8
      // must not make the index undecodable for every client.
      it->second.reason = SafeUtf8(status.message());
    }
    LOG(ERROR) << status.message();
    return status;
  };

  absl::StatusOr<RepositoryModel> found = repository_.ReadModel(name);
  if (!found.ok()) {
    if (found.status().code() == absl::StatusCode::kNotFound) {
      // Not in the repository: nothing to list or wait for (unless an older load of it
      // still serves, which keeps serving).
      absl::MutexLock lock(&mu_);
      auto it = models_.find(key);
      if (it != models_.end() && it->second.versions.empty()) models_.erase(it);
    }
    return failed(ModelLoadError(name, found.status()));
  }
  absl::StatusOr<VersionsToLoad> plan = SelectVersionsToLoad(*found, options_.device);
  if (!plan.ok()) return failed(ModelLoadError(name, plan.status()));

  std::map<int64_t, std::shared_ptr<ServedModel>> loaded;
  for (const ModelVersionLocation& v : plan->versions) {
    ModelLoadSpec spec;
    spec.name = key;
    spec.version = v.version;
    spec.model_path = v.model_path;
    spec.config = found->config;
    spec.device = plan->placements.front().device;
    spec.placements = plan->placements;
    spec.warm_up = options_.warm_up;
    spec.stop_warm_up = options_.stop_loading;
    absl::StatusOr<std::shared_ptr<ServedModel>> served = ServedModel::Load(spec, memory_);
    if (!served.ok()) {
      for (auto& [version, model] : loaded) model->Unload();
      return failed(served.status());
    }
    loaded.emplace(v.version, *std::move(served));
  }

  std::map<int64_t, std::shared_ptr<ServedModel>> old;
  {
    absl::MutexLock lock(&mu_);
    Entry& e = models_[key];
    old.swap(e.versions);
    e.versions = std::move(loaded);
    e.state = ModelState::kReady;
    e.reason.clear();
  }
  // Requests that picked an old version finish on it; Unload waits for them.
  for (auto& [version, model] : old) model->Unload();
  return absl::OkStatus();
}

absl::Status Engine::UnloadModel(absl::string_view name) {
  absl::MutexLock load_lock(&load_mu_);
  std::map<int64_t, std::shared_ptr<ServedModel>> versions;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(name);
    if (it == models_.end() || it->second.versions.empty()) {
      return absl::NotFoundError(absl::StrCat("model '", name, "' is not loaded"));
    }
    versions.swap(it->second.versions);
    it->second.state = ModelState::kUnloading;
    it->second.wanted = false;
  }
  for (auto& [version, model] : versions) model->Unload();
  absl::MutexLock lock(&mu_);
  SetState(std::string(name), ModelState::kUnavailable, "unloaded");
  return absl::OkStatus();
}

absl::Status Engine::LoadAllModels() {
  NDS_ASSIGN_OR_RETURN(std::vector<std::string> names, repository_.ListModels());
  std::vector<std::string> errors;
  absl::StatusCode code = absl::StatusCode::kOk;
  for (const std::string& name : names) {
    if (options_.stop_loading != nullptr && options_.stop_loading->load()) {
      if (code == absl::StatusCode::kOk) code = absl::StatusCode::kCancelled;
      errors.push_back(absl::StrCat("loading stopped before model '", name, "'"));
      break;
    }
    absl::Status status = LoadModel(name);
    if (!status.ok()) {
      if (code == absl::StatusCode::kOk) code = status.code();
      errors.emplace_back(status.message());
    }
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::Status(code, absl::StrJoin(errors, "; "));
}

void Engine::UnloadAllModels() {
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, entry] : models_) {
      if (!entry.versions.empty()) names.push_back(name);
    }
  }
  for (const std::string& name : names) UnloadModel(name).IgnoreError();
}

absl::StatusOr<std::shared_ptr<ServedModel>> Engine::Find(absl::string_view name,
                                                          int64_t version) const {
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  }
  const Entry& e = it->second;
  if (e.versions.empty()) {
    if (e.state == ModelState::kLoading || e.state == ModelState::kUnloading) {
      return absl::UnavailableError(
          absl::StrCat("model '", name, "' is ", absl::AsciiStrToLower(ModelStateName(e.state))));
    }
    return absl::NotFoundError(
        absl::StrCat("model '", name, "' is not loaded", e.reason.empty() ? "" : ": ", e.reason));
  }
  if (version <= 0) return e.versions.rbegin()->second;
  auto v = e.versions.find(version);
  if (v == e.versions.end()) {
    std::vector<int64_t> loaded;
    for (const auto& [n, m] : e.versions) loaded.push_back(n);
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no version ", version,
                                            " loaded (loaded: ", absl::StrJoin(loaded, ", "), ")"));
  }
  return v->second;
}

absl::StatusOr<std::shared_ptr<ServedModel>> Engine::GetModel(absl::string_view name,
                                                              int64_t version) const {
  absl::ReaderMutexLock lock(&mu_);
  return Find(name, version);
}

absl::StatusOr<InferenceResponse> Engine::Infer(const InferenceRequest& request) {
  std::shared_ptr<ServedModel> model;
  {
    absl::ReaderMutexLock lock(&mu_);
    NDS_ASSIGN_OR_RETURN(model, Find(request.model_name, request.model_version));
  }
  return model->Infer(request);
}

void Engine::InferAsync(const InferenceRequest& request, ServedModel::InferDone done) {
  absl::StatusOr<std::shared_ptr<ServedModel>> model;
  {
    absl::ReaderMutexLock lock(&mu_);
    model = Find(request.model_name, request.model_version);
  }
  // Outside mu_: `done` may answer the client right here.
  if (!model.ok()) return done(model.status());
  // Unloading shuts the model's batcher down before the engine lets go of the model, so
  // a queued request never outlives it.
  (*model)->InferAsync(request, std::move(done));
}

bool Engine::IsModelReady(absl::string_view name, int64_t version) const {
  absl::ReaderMutexLock lock(&mu_);
  return Find(name, version).ok();
}

bool Engine::AllModelsReady() const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, e] : models_) {
    if (e.wanted && (e.state != ModelState::kReady || e.versions.empty())) return false;
  }
  return true;
}

absl::StatusOr<ModelMetadata> Engine::GetModelMetadata(absl::string_view name,
                                                       int64_t version) const {
  absl::ReaderMutexLock lock(&mu_);
  NDS_ASSIGN_OR_RETURN(std::shared_ptr<ServedModel> model, Find(name, version));
  ModelMetadata md;
  md.name = model->name();
  for (const auto& [v, m] : models_.find(name)->second.versions) md.versions.push_back(v);
  md.platform = model->config().platform;
  md.max_batch_size = model->signature().max_batch_size;
  md.inputs = model->signature().inputs;
  md.outputs = model->signature().outputs;
  return md;
}

absl::StatusOr<ModelConfig> Engine::GetModelConfig(absl::string_view name, int64_t version) const {
  absl::ReaderMutexLock lock(&mu_);
  NDS_ASSIGN_OR_RETURN(std::shared_ptr<ServedModel> model, Find(name, version));
  return model->config();
}

std::vector<ModelIndexEntry> Engine::RepositoryIndex(bool ready_only) const {
  std::vector<ModelIndexEntry> rows;
  std::vector<std::string> names;
  if (absl::StatusOr<std::vector<std::string>> listed = repository_.ListModels(); listed.ok()) {
    names = *std::move(listed);
  }
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, e] : models_) names.push_back(name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  for (const std::string& name : names) {
    auto it = models_.find(name);
    if (it == models_.end() || it->second.versions.empty()) {
      if (ready_only) continue;
      ModelIndexEntry row;
      row.name = name;
      if (it != models_.end()) {
        row.state = it->second.state;
        row.reason = it->second.reason;
      }
      rows.push_back(std::move(row));
      continue;
    }
    for (const auto& [version, model] : it->second.versions) {
      rows.push_back({name, version, it->second.state, it->second.reason});
    }
  }
  return rows;
}

std::vector<std::shared_ptr<ServedModel>> Engine::LoadedModels() const {
  std::vector<std::shared_ptr<ServedModel>> out;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [n, e] : models_) {
      for (const auto& [v, m] : e.versions) out.push_back(m);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a->name() != b->name() ? a->name() < b->name() : a->version() < b->version();
  });
  return out;
}

absl::StatusOr<std::vector<ModelStatsSnapshot>> Engine::GetStatistics(absl::string_view name,
                                                                      int64_t version) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<ModelStatsSnapshot> out;
  if (!name.empty()) {
    if (version > 0) {
      NDS_ASSIGN_OR_RETURN(std::shared_ptr<ServedModel> model, Find(name, version));
      out.push_back(model->stats());
      return out;
    }
    auto it = models_.find(name);
    if (it == models_.end() || it->second.versions.empty()) {
      return absl::NotFoundError(absl::StrCat("model '", name, "' is not loaded"));
    }
    for (const auto& [v, m] : it->second.versions) out.push_back(m->stats());
    return out;
  }
  for (const auto& [n, e] : models_) {
    for (const auto& [v, m] : e.versions) out.push_back(m->stats());
  }
  std::sort(out.begin(), out.end(), [](const ModelStatsSnapshot& a, const ModelStatsSnapshot& b) {
    return a.name != b.name ? a.name < b.name : a.version < b.version;
  });
  return out;
}

}  // namespace ndserve::engine
