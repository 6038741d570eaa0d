#ifndef NDSERVE_ENGINE_SIGNATURE_H_
#define NDSERVE_ENGINE_SIGNATURE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/graph.h"
#include "engine/inference_request.h"
#include "engine/model_config.h"
#include "engine/tensor_spec.h"

namespace ndserve::engine {

// What a loaded model accepts and returns: config.pbtxt reconciled with the ONNX graph.
// `inputs` and `outputs` are parallel to the graph's inputs() and outputs(), with full
// dims (a leading kAnyDim batch dimension when max_batch_size > 0), as the KServe
// ModelMetadata RPC reports them. A plain value.
struct ModelSignature {
  int max_batch_size = 0;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

// Reconciles `config` (null: none) with `graph`. Entries the config leaves out are
// taken from the graph (as Triton's auto-complete does); a config entry that names no
// graph tensor, disagrees on type, rank or a fixed dimension, or a batching config
// whose model has a fixed first dimension is INVALID_ARGUMENT naming the tensor.
// Without a config, max_batch_size is 0 and the graph's shapes are served as declared.
absl::StatusOr<ModelSignature> ResolveSignature(const Graph& graph, const ModelConfig* config);

// The config the model is served with: `config` (or an empty one named `name`) with the
// signature's inputs and outputs filled in (dims without the batch dimension).
ModelConfig EffectiveConfig(const ModelSignature& signature, const ModelConfig* config,
                            const std::string& name);

// A request checked against a signature.
struct ValidatedRequest {
  // For each signature input, the index of the request tensor that feeds it.
  std::vector<int> input_tensor;
  // Signature output indices to return, in response order.
  std::vector<int> outputs;
  // Leading dimension when max_batch_size > 0, else 1.
  int64_t batch_size = 1;
};

// INVALID_ARGUMENT naming the tensor and the problem for: an unknown or repeated input,
// a missing input, a wrong datatype, a shape whose rank or fixed dims differ from the
// model's (kAnyDim matches any size), a negative or zero dimension (unless the model
// declares that dimension as 0), a batch above max_batch_size or differing between
// inputs, a byte count that is not numel x element size, or an unknown or repeated
// requested output.
absl::StatusOr<ValidatedRequest> ValidateRequest(const ModelSignature& signature,
                                                 const InferenceRequest& request);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_SIGNATURE_H_
