#include "engine/model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace ndserve::engine {

absl::StatusOr<std::shared_ptr<Model>> Model::Create(std::string name, int64_t version, Graph graph,
                                                     ModelSignature signature, ModelConfig config,
                                                     Device device, MemorySystem* memory) {
  std::shared_ptr<Model> model(new Model(std::move(name), version, std::move(graph),
                                         std::move(signature), std::move(config), device));
  NDS_ASSIGN_OR_RETURN(
      model->manager_,
      memory->NewBaseManager(device, ManagerLevel::kModel,
                             absl::StrCat("model/", model->name_, ":", model->version_)));
  const auto& inits = model->graph_.initializers();
  model->initializers_.reserve(inits.size());
  for (const Initializer& init : inits) {
    absl::StatusOr<NDArray> array = model->manager_->FromHost(
        init.shape, init.dtype,
        absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(init.bytes.data()),
                                  init.bytes.size()),
        init.name);
    if (!array.ok()) {
      model->Close().IgnoreError();
      return absl::Status(array.status().code(), absl::StrCat("uploading initializer '", init.name,
                                                              "': ", array.status().message()));
    }
    model->parameter_bytes_ += array->nbytes();
    model->initializers_.push_back(*std::move(array));
  }
  model->manager_->Cap();
  model->graph_.ReleaseInitializerBytes();
  return model;
}

Model::~Model() { Close().IgnoreError(); }

absl::Status Model::Close() {
  if (manager_ == nullptr) return absl::OkStatus();
  return manager_->Close();
}

}  // namespace ndserve::engine
