#include "engine/signature.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/tensor_view.h"

namespace ndserve::engine {
namespace {

std::string Names(absl::Span<const TensorSpec> specs) {
  return absl::StrJoin(specs, ", ",
                       [](std::string* out, const TensorSpec& s) { absl::StrAppend(out, s.name); });
}

// Merges one graph tensor with its config entry (null: none).
absl::StatusOr<TensorSpec> Reconcile(const TensorSpec& graph_spec, const TensorSpec* config_spec,
                                     int max_batch_size, absl::string_view kind) {
  const std::string where = absl::StrCat(kind, " '", graph_spec.name, "'");
  if (max_batch_size > 0 && !graph_spec.any_rank &&
      (graph_spec.dims.empty() || graph_spec.dims[0] != kAnyDim)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": max_batch_size is ", max_batch_size, " but the model's shape ",
                     DimsToString(graph_spec.dims), " has no variable first (batch) dimension"));
  }
  if (config_spec == nullptr) return graph_spec;
  if (config_spec->dtype != graph_spec.dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": config.pbtxt says ", DTypeName(config_spec->dtype),
                     " but the model's type is ", DTypeName(graph_spec.dtype)));
  }
  TensorSpec spec = graph_spec;
  spec.any_rank = false;
  spec.dims.clear();
  if (max_batch_size > 0) spec.dims.push_back(kAnyDim);
  spec.dims.insert(spec.dims.end(), config_spec->dims.begin(), config_spec->dims.end());
  if (graph_spec.any_rank) return spec;
  if (spec.dims.size() != graph_spec.dims.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": config.pbtxt dims ", DimsToString(config_spec->dims),
                     max_batch_size > 0 ? " (plus the batch dimension)" : "",
                     " do not match the model's ", DimsToString(graph_spec.dims)));
  }
  for (size_t i = 0; i < spec.dims.size(); ++i) {
    const int64_t g = graph_spec.dims[i];
    int64_t& c = spec.dims[i];
    if (g != kAnyDim && c != kAnyDim && g != c) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": config.pbtxt dims ", DimsToString(config_spec->dims),
                       " do not match the model's ", DimsToString(graph_spec.dims)));
    }
    if (c == kAnyDim) c = g;  // the more specific of the two
  }
  return spec;
}

absl::StatusOr<std::vector<TensorSpec>> ReconcileAll(absl::Span<const TensorSpec> graph_specs,
                                                     const std::vector<TensorSpec>* config_specs,
                                                     int max_batch_size, absl::string_view kind) {
  absl::flat_hash_map<std::string, const TensorSpec*> by_name;
  if (config_specs != nullptr) {
    for (const TensorSpec& s : *config_specs) by_name[s.name] = &s;
  }
  std::vector<TensorSpec> out;
  for (const TensorSpec& g : graph_specs) {
    auto it = by_name.find(g.name);
    const TensorSpec* c = it == by_name.end() ? nullptr : it->second;
    if (c != nullptr) by_name.erase(it);
    NDS_ASSIGN_OR_RETURN(TensorSpec spec, Reconcile(g, c, max_batch_size, kind));
    out.push_back(std::move(spec));
  }
  if (!by_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.pbtxt ", kind, " '", by_name.begin()->first,
                     "' is not one of the model's ", kind, "s (", Names(graph_specs), ")"));
  }
  return out;
}

}  // namespace

absl::StatusOr<ModelSignature> ResolveSignature(const Graph& graph, const ModelConfig* config) {
  ModelSignature sig;
  sig.max_batch_size = config != nullptr ? config->max_batch_size : 0;
  NDS_ASSIGN_OR_RETURN(sig.inputs, ReconcileAll(graph.inputs(), config ? &config->inputs : nullptr,
                                                sig.max_batch_size, "input"));
  NDS_ASSIGN_OR_RETURN(sig.outputs,
                       ReconcileAll(graph.outputs(), config ? &config->outputs : nullptr,
                                    sig.max_batch_size, "output"));
  return sig;
}

ModelConfig EffectiveConfig(const ModelSignature& signature, const ModelConfig* config,
                            const std::string& name) {
  ModelConfig out = config != nullptr ? *config : ModelConfig();
  out.name = name;
  if (out.platform.empty()) out.platform = "onnxruntime_onnx";
  out.max_batch_size = signature.max_batch_size;
  auto strip = [&](const std::vector<TensorSpec>& specs) {
    std::vector<TensorSpec> result = specs;
    if (signature.max_batch_size > 0) {
      for (TensorSpec& s : result) {
        if (!s.dims.empty()) s.dims.erase(s.dims.begin());
      }
    }
    return result;
  };
  out.inputs = strip(signature.inputs);
  out.outputs = strip(signature.outputs);
  return out;
}

absl::StatusOr<ValidatedRequest> ValidateRequest(const ModelSignature& signature,
                                                 const InferenceRequest& request) {
  ValidatedRequest v;
  v.input_tensor.assign(signature.inputs.size(), -1);
  absl::flat_hash_map<absl::string_view, int> input_index;
  for (int i = 0; i < static_cast<int>(signature.inputs.size()); ++i) {
    input_index[signature.inputs[i].name] = i;
  }
  int64_t batch = -1;
  std::string batch_from;
  for (int t = 0; t < static_cast<int>(request.inputs.size()); ++t) {
    const InferInputTensor& in = request.inputs[t];
    auto it = input_index.find(in.name);
    if (it == input_index.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected input '", in.name,
                       "' (the model's inputs are: ", Names(signature.inputs), ")"));
    }
    const TensorSpec& spec = signature.inputs[it->second];
    if (v.input_tensor[it->second] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("input '", in.name, "' is given twice"));
    }
    v.input_tensor[it->second] = t;
    const std::string where = absl::StrCat("input '", in.name, "'");
    if (in.dtype != spec.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": datatype ", DTypeName(in.dtype),
                                                     " does not match the model's ",
                                                     DTypeName(spec.dtype)));
    }
    const std::string shape_text = DimsToString(in.shape);
    if (!ShapeMatches(spec, in.shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": shape ", shape_text, " does not match the model's ", DimsToString(spec.dims)));
    }
    for (size_t d = 0; d < in.shape.size(); ++d) {
      const bool declared_zero = !spec.any_rank && spec.dims[d] == 0;
      if (in.shape[d] < 0 || (in.shape[d] == 0 && !declared_zero)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": shape ", shape_text,
                         in.shape[d] < 0 ? " has a negative dimension" : " has no elements"));
      }
    }
    NDS_RETURN_IF_ERROR(kernels::ValidateShape(in.shape, where));
    if (signature.max_batch_size > 0) {
      const int64_t b = in.shape.empty() ? 0 : in.shape[0];
      if (b > signature.max_batch_size) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: batch size %d exceeds the model's max_batch_size %d", where, b,
                            signature.max_batch_size));
      }
      if (batch >= 0 && b != batch) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: batch size %d differs from input '%s''s %d", where, b, batch_from, batch));
      }
      batch = b;
      batch_from = in.name;
    }
    uint64_t expected = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(kernels::NumElements(in.shape)),
                               DTypeSize(in.dtype), &expected) ||
        expected != in.data.size()) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: %d bytes of data, but %s%s needs %d",
                                                        where, in.data.size(), DTypeName(in.dtype),
                                                        shape_text, expected));
    }
  }
  for (int i = 0; i < static_cast<int>(signature.inputs.size()); ++i) {
    if (v.input_tensor[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing input '", signature.inputs[i].name, "'"));
    }
  }
  v.batch_size = batch > 0 ? batch : 1;
  if (request.requested_outputs.empty()) {
    for (int i = 0; i < static_cast<int>(signature.outputs.size()); ++i) v.outputs.push_back(i);
    return v;
  }
  for (const std::string& name : request.requested_outputs) {
    int found = -1;
    for (int i = 0; i < static_cast<int>(signature.outputs.size()); ++i) {
      if (signature.outputs[i].name == name) found = i;
    }
    if (found < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown output '", name,
                       "' requested (the model's outputs are: ", Names(signature.outputs), ")"));
    }
    // Refused, as Triton does: each repeat would copy the whole tensor into the response
    // again, so a small request could ask for an arbitrarily large one.
    if (std::find(v.outputs.begin(), v.outputs.end(), found) != v.outputs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("output '", name, "' is requested twice"));
    }
    v.outputs.push_back(found);
  }
  return v;
}

}  // namespace ndserve::engine
