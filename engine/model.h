#ifndef NDSERVE_ENGINE_MODEL_H_
#define NDSERVE_ENGINE_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/graph.h"
#include "engine/model_config.h"
#include "engine/signature.h"
#include "kernels/cpu/packed_gemm.h"
#include "memory/device.h"
#include "memory/memory_system.h"
#include "memory/nd_array.h"
#include "memory/nd_manager.h"

namespace ndserve::engine {

// One version of a model on one device: its graph, its signature and its parameters.
//
// Ownership: owns the graph and a model-level NDManager ("model/<name>:<version>") that
// holds one array per initializer. The manager is capped once the parameters are
// uploaded, so anything a request would attach to it (the embedding leak) fails instead
// of growing it. Predictor managers are opened under it (docs/design.md §2: system -> model
// -> predictor -> context), so Close() frees the parameters and closes every predictor
// and context below. Thread-safe: immutable after Create except Close.
class Model {
 public:
  // Opens the model manager under `memory`'s system manager of `device` (borrowed; it
  // must outlive the model), uploads the graph's initializers (then frees their host
  // copies) and caps the manager. The pool's RESOURCE_EXHAUSTED is passed through;
  // nothing stays allocated on failure.
  static absl::StatusOr<std::shared_ptr<Model>> Create(std::string name, int64_t version,
                                                       Graph graph, ModelSignature signature,
                                                       ModelConfig config, Device device,
                                                       MemorySystem* memory);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::string& name() const { return name_; }
  int64_t version() const { return version_; }
  Device device() const { return device_; }
  const Graph& graph() const { return graph_; }
  const ModelSignature& signature() const { return signature_; }
  // The effective config (config.pbtxt completed from the graph).
  const ModelConfig& config() const { return config_; }
  // The array of graph().initializers()[index].
  const NDArray& initializer(int index) const { return initializers_[index]; }
  const std::shared_ptr<NDManager>& manager() const { return manager_; }
  // The memory system the model lives in (borrowed): where a request on a GPU opens the
  // host-side scope of its shape arithmetic.
  MemorySystem* memory() const { return memory_; }
  uint64_t parameter_bytes() const { return parameter_bytes_; }
  // Node `node`'s weight as its CPU kernel reads it, packed at load
  // (kernels/cpu/packed_weights.h), or null: on a GPU, and for nodes without a packed path.
  const kernels::cpu::PackedMatrix* packed_weight(int node) const {
    return packed_weights_.empty() ? nullptr : packed_weights_[node].get();
  }
  // Host bytes of those packed copies (held besides the initializers, outside the pools).
  uint64_t packed_weight_bytes() const { return packed_weight_bytes_; }

  // Closes the model manager and, with it, every predictor and context under it. Callers
  // make sure no request runs any more (ServedModel drains its predictors first).
  absl::Status Close();

 private:
  Model(std::string name, int64_t version, Graph graph, ModelSignature signature,
        ModelConfig config, Device device)
      : name_(std::move(name)),
        version_(version),
        device_(device),
        graph_(std::move(graph)),
        signature_(std::move(signature)),
        config_(std::move(config)) {}

  const std::string name_;
  const int64_t version_;
  const Device device_;
  Graph graph_;
  const ModelSignature signature_;
  const ModelConfig config_;
  MemorySystem* memory_ = nullptr;
  std::shared_ptr<NDManager> manager_;
  std::vector<NDArray> initializers_;
  uint64_t parameter_bytes_ = 0;
  // By node; empty on a GPU.
  std::vector<std::unique_ptr<const kernels::cpu::PackedMatrix>> packed_weights_;
  uint64_t packed_weight_bytes_ = 0;

  // Fills packed_weights_ from the graph's initializer bytes (before they are released).
  void PackWeights();
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_MODEL_H_
