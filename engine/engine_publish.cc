// Engine::PublishVersion: a new version from new parameter values (docs/design.md §4.1).
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/engine.h"
#include "engine/onnx_writer.h"

namespace ndserve::engine {

absl::StatusOr<int64_t> Engine::PublishVersion(absl::string_view name,
                                               absl::Span<const HostTensor> values) {
  namespace fs = std::filesystem;
  absl::MutexLock load_lock(&load_mu_);
  std::shared_ptr<ServedModel> current;
  {
    absl::ReaderMutexLock lock(&mu_);
    NDS_ASSIGN_OR_RETURN(current, Find(name, 0));
  }
  auto failed = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat("publishing a new version of model '", name,
                                                    "': ", status.message()));
  };
  absl::StatusOr<RepositoryModel> found = repository_.ReadModel(name);
  if (!found.ok()) return failed(found.status());
  const VersionPolicy policy =
      found->config.has_value() ? found->config->version_policy : VersionPolicy();
  if (policy.kind == VersionPolicy::Kind::kSpecific) {
    return failed(absl::FailedPreconditionError(
        "its version_policy names specific versions, so a published version would not be "
        "loaded again after a restart; use `latest` or `all`"));
  }
  int64_t next = current->version() + 1;
  for (const ModelVersionLocation& v : found->versions) next = std::max(next, v.version + 1);
  const fs::path dir = fs::path(found->dir) / std::to_string(next);
  const std::string path = (dir / "model.onnx").string();
  std::error_code ec;
  if (!fs::create_directory(dir, ec)) {
    return failed(absl::InternalError(
        absl::StrCat("cannot create ", dir.string(), ": ", ec ? ec.message() : "it exists")));
  }
  auto remove_dir = [&] {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  };
  absl::Status written = WriteOnnxWithInitializers(current->model_path(), values, path);
  if (!written.ok()) {
    remove_dir();
    return failed(written);
  }
  ModelLoadSpec spec;
  spec.name = std::string(name);
  spec.version = next;
  spec.model_path = path;
  spec.config = found->config;
  spec.device = current->device();
  spec.warm_up = options_.warm_up;
  spec.stop_warm_up = options_.stop_loading;
  absl::StatusOr<std::shared_ptr<ServedModel>> loaded = ServedModel::Load(spec, memory_);
  if (!loaded.ok()) {
    remove_dir();
    return failed(loaded.status());
  }

  std::vector<std::shared_ptr<ServedModel>> retired;
  {
    absl::MutexLock lock(&mu_);
    Entry& e = models_[std::string(name)];
    e.versions.emplace(next, *std::move(loaded));
    e.state = ModelState::kReady;
    e.reason.clear();
    if (policy.kind == VersionPolicy::Kind::kLatest) {
      while (e.versions.size() > std::max<uint32_t>(policy.num_versions, 1)) {
        retired.push_back(std::move(e.versions.begin()->second));
        e.versions.erase(e.versions.begin());
      }
    }
  }
  current.reset();
  LOG(INFO) << "published model '" << name << "' version " << next << " to " << path << "; "
            << retired.size() << " older version(s) retiring";
  for (std::shared_ptr<ServedModel>& old : retired) ServedModel::Retire(std::move(old));
  return next;
}

}  // namespace ndserve::engine
