#include "engine/repository.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/text.h"

namespace ndserve::engine {
namespace fs = std::filesystem;
namespace {

// A version directory's name: digits only, a positive number.
bool ParseVersion(const std::string& name, int64_t* version) {
  if (name.empty() || !std::all_of(name.begin(), name.end(), absl::ascii_isdigit)) return false;
  return absl::SimpleAtoi(name, version) && *version > 0;
}

absl::Status CheckModelFile(const ModelVersionLocation& v) {
  std::error_code ec;
  if (!fs::is_regular_file(v.model_path, ec)) {
    return absl::NotFoundError(
        absl::StrCat("version ", v.version, ": model file '", v.model_path, "' does not exist"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("model name is empty");
  NDS_RETURN_IF_ERROR(CheckName("model name", name));
  if (name == "." || name == ".." || name.find('/') != absl::string_view::npos ||
      name.find('\\') != absl::string_view::npos ||
      std::any_of(name.begin(), name.end(), [](char c) { return absl::ascii_iscntrl(c); })) {
    return absl::InvalidArgumentError(absl::StrCat("model name '", absl::CEscape(ClipName(name)),
                                                   "' is not a valid directory name"));
  }
  return absl::OkStatus();
}

ModelRepository::ModelRepository(std::string root) : root_(std::move(root)) {}

absl::StatusOr<std::vector<std::string>> ModelRepository::ListModels() const {
  std::error_code ec;
  fs::directory_iterator it(root_, ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat("model repository '", root_, "': ", ec.message()));
  }
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : it) {
    std::error_code dir_ec;
    if (!entry.is_directory(dir_ec)) continue;
    std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.') continue;  // hidden: editors, VCS
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<RepositoryModel> ModelRepository::ReadModel(absl::string_view name) const {
  NDS_RETURN_IF_ERROR(ValidateModelName(name));
  RepositoryModel model;
  model.name = std::string(name);
  model.dir = (fs::path(root_) / model.name).string();
  std::error_code ec;
  if (!fs::is_directory(model.dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("model '", model.name, "': directory '", model.dir, "' does not exist"));
  }
  const std::string config_path = (fs::path(model.dir) / "config.pbtxt").string();
  if (fs::exists(config_path, ec)) {
    NDS_ASSIGN_OR_RETURN(ModelConfig config, ReadModelConfig(config_path));
    if (!config.name.empty() && config.name != model.name) {
      return absl::InvalidArgumentError(absl::StrCat(config_path, ": name '", config.name,
                                                     "' does not match the directory name '",
                                                     model.name, "'"));
    }
    model.config = std::move(config);
  }
  const std::string filename = model.config ? model.config->ModelFilename() : "model.onnx";
  fs::directory_iterator it(model.dir, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(model.dir, ": ", ec.message()));
  for (const fs::directory_entry& entry : it) {
    std::error_code dir_ec;
    int64_t version = 0;
    if (!entry.is_directory(dir_ec) || !ParseVersion(entry.path().filename().string(), &version)) {
      continue;
    }
    model.versions.push_back({version, (entry.path() / filename).string()});
  }
  if (model.versions.empty()) {
    return absl::NotFoundError(
        absl::StrCat("model '", model.name, "': no version directory in '", model.dir, "'"));
  }
  std::sort(model.versions.begin(), model.versions.end(),
            [](const auto& a, const auto& b) { return a.version < b.version; });
  return model;
}

absl::StatusOr<std::vector<ModelVersionLocation>> ModelRepository::SelectVersions(
    const RepositoryModel& model, const VersionPolicy& policy) {
  std::vector<ModelVersionLocation> selected;
  switch (policy.kind) {
    case VersionPolicy::Kind::kAll:
      selected.assign(model.versions.rbegin(), model.versions.rend());
      break;
    case VersionPolicy::Kind::kLatest: {
      const size_t n =
          std::min<size_t>(std::max<uint32_t>(policy.num_versions, 1), model.versions.size());
      selected.assign(model.versions.rbegin(), model.versions.rbegin() + n);
      break;
    }
    case VersionPolicy::Kind::kSpecific:
      for (int64_t v : policy.versions) {
        NDS_ASSIGN_OR_RETURN(ModelVersionLocation loc, ResolveVersion(model, v));
        selected.push_back(std::move(loc));
      }
      break;
  }
  for (const ModelVersionLocation& v : selected) {
    absl::Status status = CheckModelFile(v);
    if (!status.ok()) {
      return absl::NotFoundError(absl::StrCat("model '", model.name, "' ", status.message()));
    }
  }
  return selected;
}

absl::StatusOr<ModelVersionLocation> ModelRepository::ResolveVersion(const RepositoryModel& model,
                                                                     int64_t version) {
  if (model.versions.empty()) {
    return absl::NotFoundError(absl::StrCat("model '", model.name, "' has no versions"));
  }
  const ModelVersionLocation* found = &model.versions.back();
  if (version > 0) {
    found = nullptr;
    for (const ModelVersionLocation& v : model.versions) {
      if (v.version == version) found = &v;
    }
    if (found == nullptr) {
      return absl::NotFoundError(absl::StrCat("model '", model.name, "' has no version ", version,
                                              " (no directory '", model.dir, "/", version, "')"));
    }
  }
  absl::Status status = CheckModelFile(*found);
  if (!status.ok()) {
    return absl::NotFoundError(absl::StrCat("model '", model.name, "' ", status.message()));
  }
  return *found;
}

}  // namespace ndserve::engine
