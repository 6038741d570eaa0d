#ifndef NDSERVE_ENGINE_REPOSITORY_H_
#define NDSERVE_ENGINE_REPOSITORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model_config.h"

namespace ndserve::engine {

// One version directory of a model: <repo>/<model>/<version>/<model file>.
struct ModelVersionLocation {
  int64_t version = 0;
  std::string model_path;  // the model file (which may be missing)
};

// What a model directory holds.
struct RepositoryModel {
  std::string name;
  std::string dir;                             // <repo>/<model>
  std::optional<ModelConfig> config;           // config.pbtxt, when present
  std::vector<ModelVersionLocation> versions;  // numeric version directories, ascending
};

// A model repository laid out as Triton's (docs/design.md §4):
//   <root>/<model>/config.pbtxt            optional
//   <root>/<model>/<version>/model.onnx    version: a positive integer
// Reads the file system on every call (nothing is cached, so models added while the
// daemon runs are found). Immutable; thread-safe.
class ModelRepository {
 public:
  explicit ModelRepository(std::string root);

  const std::string& root() const { return root_; }

  // Names of the model directories, sorted. NOT_FOUND naming the root if it is missing.
  absl::StatusOr<std::vector<std::string>> ListModels() const;

  // Reads one model directory. INVALID_ARGUMENT for a name that is not a single path
  // component; NOT_FOUND naming the directory if it does not exist or has no version
  // directory; config errors (INVALID_ARGUMENT naming the file) as they come.
  absl::StatusOr<RepositoryModel> ReadModel(absl::string_view name) const;

  // The versions to serve under `policy` (highest first for kLatest), each of which must
  // have its model file (NOT_FOUND naming the path otherwise).
  static absl::StatusOr<std::vector<ModelVersionLocation>> SelectVersions(
      const RepositoryModel& model, const VersionPolicy& policy);

  // One version: `version` <= 0 means the highest. NOT_FOUND naming the path when that
  // version directory or its model file does not exist.
  static absl::StatusOr<ModelVersionLocation> ResolveVersion(const RepositoryModel& model,
                                                             int64_t version);

 private:
  std::string root_;
};

// OK for a name that can be a model directory: non-empty, at most kMaxNameBytes of valid
// UTF-8 (base/text.h), no '/', not "." or "..", no control characters. The gRPC
// repository API passes client text here.
absl::Status ValidateModelName(absl::string_view name);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_REPOSITORY_H_
