#include "server/model_memory_source.h"

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/served_model.h"

namespace ndserve {

ModelMemorySource EngineModelMemory(const engine::Engine* engine) {
  return [engine] {
    std::vector<ModelMemorySample> out;
    for (const std::shared_ptr<engine::ServedModel>& model : engine->LoadedModels()) {
      const std::string version = absl::StrCat(model->version());
      for (const engine::ModelMemoryUsage& u : model->MemoryUsage()) {
        out.push_back({model->name(), version, u.device.ToString(), u.kind, u.bytes});
      }
    }
    return out;
  };
}

void FillMemoryUsage(const std::vector<engine::ModelMemoryUsage>& usage,
                     google::protobuf::RepeatedPtrField<::inference::MemoryUsage>* out) {
  std::map<Device, std::uint64_t> per_device;
  for (const engine::ModelMemoryUsage& u : usage) per_device[u.device] += u.bytes;
  for (const auto& [device, bytes] : per_device) {
    ::inference::MemoryUsage* m = out->Add();
    m->set_type(device.is_cuda() ? "GPU" : "CPU");
    m->set_id(device.ordinal);
    m->set_byte_size(bytes);
  }
}

}  // namespace ndserve
