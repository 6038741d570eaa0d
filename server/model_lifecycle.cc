#include "server/model_lifecycle.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/logging.h"
#include "engine/engine.h"
#include "server/inference_metrics.h"

namespace ndserve {

std::vector<int64_t> ModelLifecycle::LoadedVersions(absl::string_view name) const {
  absl::StatusOr<engine::ModelMetadata> md = engine_->GetModelMetadata(name);
  if (!md.ok()) return {};
  return md->versions;
}

void ModelLifecycle::Announce(absl::string_view name, const std::vector<int64_t>& before) {
  const std::vector<int64_t> after = LoadedVersions(name);
  for (int64_t v : before) {
    if (std::find(after.begin(), after.end(), v) == after.end()) {
      metrics_->ModelUnloaded(name, absl::StrCat(v));
    }
  }
  // A reload replaces a version with a fresh copy: it reads 1 either way.
  for (int64_t v : after) metrics_->ModelLoaded(name, absl::StrCat(v));
}

absl::Status ModelLifecycle::Load(absl::string_view name) {
  absl::MutexLock lock(&mu_);
  const absl::Time start = absl::Now();
  const std::vector<int64_t> before = LoadedVersions(name);
  absl::Status status = engine_->LoadModel(name);
  Announce(name, before);
  if (status.ok()) {
    LOG(INFO) << absl::StrFormat("model '%s' loaded (version %s) in %.0f ms", name,
                                 absl::StrJoin(LoadedVersions(name), ","),
                                 absl::ToDoubleMilliseconds(absl::Now() - start));
  } else {
    LOG(WARNING) << "model '" << name << "' did not load: " << status.message()
                 << (before.empty() ? "" : " (the previous version keeps serving)");
  }
  return status;
}

absl::Status ModelLifecycle::Unload(absl::string_view name) {
  absl::MutexLock lock(&mu_);
  const absl::Time start = absl::Now();
  const std::vector<int64_t> before = LoadedVersions(name);
  absl::Status status = engine_->UnloadModel(name);
  Announce(name, before);
  if (status.ok()) {
    LOG(INFO) << absl::StrFormat("model '%s' unloaded (version %s) in %.0f ms", name,
                                 absl::StrJoin(before, ","),
                                 absl::ToDoubleMilliseconds(absl::Now() - start));
  } else {
    LOG(WARNING) << "model '" << name << "' was not unloaded: " << status.message();
  }
  return status;
}

absl::Status ModelLifecycle::LoadAll() {
  absl::MutexLock lock(&mu_);
  const absl::Time start = absl::Now();
  // The engine logs each failure as it happens.
  absl::Status status = engine_->LoadAllModels();
  int ready = 0;
  int failed = 0;
  for (const engine::ModelIndexEntry& row : engine_->RepositoryIndex()) {
    if (row.state == engine::ModelState::kReady && row.version > 0) {
      metrics_->ModelLoaded(row.name, absl::StrCat(row.version));
      ++ready;
    } else if (row.state == engine::ModelState::kUnavailable) {
      ++failed;
    }
  }
  LOG(INFO) << absl::StrFormat("loaded %d model version%s in %.0f ms%s", ready,
                               ready == 1 ? "" : "s",
                               absl::ToDoubleMilliseconds(absl::Now() - start),
                               failed == 0 ? "" : absl::StrCat("; ", failed, " failed"));
  return status;
}

void ModelLifecycle::UnloadAll() {
  absl::MutexLock lock(&mu_);
  std::vector<engine::ModelIndexEntry> loaded = engine_->RepositoryIndex(/*ready_only=*/true);
  engine_->UnloadAllModels();
  for (const engine::ModelIndexEntry& row : loaded) {
    metrics_->ModelUnloaded(row.name, absl::StrCat(row.version));
  }
  LOG(INFO) << "unloaded every model (" << loaded.size() << " version"
            << (loaded.size() == 1 ? "" : "s") << ")";
}

}  // namespace ndserve
