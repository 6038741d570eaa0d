#include "engine/model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/packed_weights.h"

namespace ndserve::engine {

absl::StatusOr<std::shared_ptr<Model>> Model::Create(std::string name, int64_t version, Graph graph,
                                                     ModelSignature signature, ModelConfig config,
                                                     Device device, MemorySystem* memory) {
  std::shared_ptr<Model> model(new Model(std::move(name), version, std::move(graph),
                                         std::move(signature), std::move(config), device));
  model->memory_ = memory;
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
  if (!device.is_cuda()) model->PackWeights();
  model->graph_.ReleaseInitializerBytes();
  return model;
}

void Model::PackWeights() {
  const Graph& g = graph_;
  packed_weights_.resize(g.nodes().size());
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const Node& node = g.nodes()[n];
    if (node.on_host || node.has_dynamic_attrs()) continue;
    const int input = kernels::cpu::PackableWeightInput(node.op, node.attrs);
    if (input < 0 || input >= static_cast<int>(node.inputs.size())) continue;
    const Value& v = g.values()[node.inputs[input]];
    if (v.source != ValueSource::kInitializer) continue;
    const Initializer& init = g.initializers()[v.index];
    kernels::TensorView view;
    view.data = const_cast<char*>(init.bytes.data());
    view.dtype = init.dtype;
    view.shape = init.shape;
    packed_weights_[n] = kernels::cpu::PackNodeWeight(node.op, node.attrs, view);
    if (packed_weights_[n] != nullptr) packed_weight_bytes_ += packed_weights_[n]->bytes();
  }
}

Model::~Model() { Close().IgnoreError(); }

absl::Status Model::Close() {
  if (manager_ == nullptr) return absl::OkStatus();
  return manager_->Close();
}

}  // namespace ndserve::engine
