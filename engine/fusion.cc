#include "engine/fusion.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kernels/conv_activation.h"

namespace ndserve::engine {
namespace {

bool IsDefaultDomain(const NodeDef& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

std::vector<float> Floats(const Initializer& init) {
  std::vector<float> v(init.bytes.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), init.bytes.data(), v.size() * sizeof(float));
  return v;
}

Initializer FromFloats(std::string name, kernels::Shape shape, const std::vector<float>& v) {
  Initializer init;
  init.name = std::move(name);
  init.dtype = DType::kFp32;
  init.shape = std::move(shape);
  init.bytes.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return init;
}

// A name no value of `def` has yet.
std::string FreshName(const absl::flat_hash_set<std::string>& taken, const std::string& base) {
  std::string name = base;
  for (int i = 1; taken.contains(name); ++i) name = absl::StrCat(base, "_", i);
  return name;
}

}  // namespace

absl::StatusOr<int> FuseConvBatchNorm(GraphDef* def) {
  absl::flat_hash_map<std::string, int> init_index;
  absl::flat_hash_set<std::string> names;
  for (int i = 0; i < static_cast<int>(def->initializers.size()); ++i) {
    init_index[def->initializers[i].name] = i;
    names.insert(def->initializers[i].name);
  }
  absl::flat_hash_map<std::string, int> producer, readers;
  for (int i = 0; i < static_cast<int>(def->nodes.size()); ++i) {
    for (const std::string& in : def->nodes[i].inputs) ++readers[in];
    for (const std::string& out : def->nodes[i].outputs) {
      if (!out.empty()) producer[out] = i;
      names.insert(out);
    }
  }
  absl::flat_hash_set<std::string> graph_outputs;
  for (const TensorSpec& o : def->outputs) graph_outputs.insert(o.name);
  for (const TensorSpec& in : def->inputs) names.insert(in.name);

  // An FP32 initializer named `name` of exactly `shape`, or null.
  auto fp32_init = [&](const std::string& name) -> const Initializer* {
    auto it = init_index.find(name);
    if (it == init_index.end()) return nullptr;
    const Initializer& init = def->initializers[it->second];
    if (init.dtype != DType::kFp32 ||
        init.bytes.size() != static_cast<std::size_t>(kernels::NumElements(init.shape)) * 4) {
      return nullptr;
    }
    return &init;
  };

  std::vector<bool> removed(def->nodes.size(), false);
  int fused = 0;
  for (int b = 0; b < static_cast<int>(def->nodes.size()); ++b) {
    const NodeDef& bn = def->nodes[b];
    if (bn.op_type != "BatchNormalization" || !IsDefaultDomain(bn) || bn.inputs.size() != 5) {
      continue;
    }
    bool extra_outputs = bn.outputs.empty() || bn.outputs[0].empty();
    for (std::size_t i = 1; i < bn.outputs.size(); ++i) extra_outputs |= !bn.outputs[i].empty();
    if (extra_outputs) continue;
    if (auto t = bn.attrs.find("training_mode");
        t != bn.attrs.end() &&
        !(std::holds_alternative<int64_t>(t->second) && std::get<int64_t>(t->second) == 0)) {
      continue;
    }
    float epsilon = 1e-5f;
    if (auto e = bn.attrs.find("epsilon"); e != bn.attrs.end()) {
      if (const float* f = std::get_if<float>(&e->second)) {
        epsilon = *f;
      } else {
        continue;
      }
    }
    const std::string& mid = bn.inputs[0];
    auto p = producer.find(mid);
    if (p == producer.end() || readers[mid] != 1 || graph_outputs.contains(mid)) continue;
    NodeDef& conv = def->nodes[p->second];
    if (conv.op_type != "Conv" || !IsDefaultDomain(conv) || conv.outputs.size() != 1 ||
        conv.inputs.size() < 2 || conv.inputs.size() > 3) {
      continue;
    }
    const Initializer* w = fp32_init(conv.inputs[1]);
    if (w == nullptr || w->shape.size() < 3) continue;
    const int64_t m = w->shape[0];
    const bool has_bias = conv.inputs.size() == 3 && !conv.inputs[2].empty();
    const Initializer* conv_b = has_bias ? fp32_init(conv.inputs[2]) : nullptr;
    if (has_bias && (conv_b == nullptr || conv_b->shape != kernels::Shape{m})) continue;
    const Initializer* params[4];
    bool ok = true;
    for (int i = 0; i < 4; ++i) {
      params[i] = fp32_init(bn.inputs[i + 1]);
      ok &= params[i] != nullptr && params[i]->shape == kernels::Shape{m};
    }
    if (!ok) continue;

    const std::vector<float> scale = Floats(*params[0]), shift = Floats(*params[1]),
                             mean = Floats(*params[2]), var = Floats(*params[3]);
    std::vector<float> weight = Floats(*w);
    std::vector<float> bias = has_bias ? Floats(*conv_b) : std::vector<float>(m, 0.0f);
    const int64_t per_out = m == 0 ? 0 : static_cast<int64_t>(weight.size()) / m;
    for (int64_t o = 0; o < m; ++o) {
      // In double, so the fold itself adds no rounding beyond the final float.
      const double a = static_cast<double>(scale[o]) /
                       std::sqrt(static_cast<double>(var[o]) + static_cast<double>(epsilon));
      for (int64_t i = 0; i < per_out; ++i) {
        weight[o * per_out + i] = static_cast<float>(weight[o * per_out + i] * a);
      }
      bias[o] = static_cast<float>((static_cast<double>(bias[o]) - mean[o]) * a + shift[o]);
    }
    const kernels::Shape w_shape = w->shape;
    const std::string w_name = FreshName(names, absl::StrCat(conv.inputs[1], "_bn_folded"));
    names.insert(w_name);
    const std::string b_name = FreshName(names, absl::StrCat(bn.inputs[2], "_bn_folded"));
    names.insert(b_name);
    // Pointers into initializers die here: the push_backs may reallocate.
    def->initializers.push_back(FromFloats(w_name, w_shape, weight));
    init_index[w_name] = static_cast<int>(def->initializers.size()) - 1;
    def->initializers.push_back(FromFloats(b_name, {m}, bias));
    init_index[b_name] = static_cast<int>(def->initializers.size()) - 1;
    conv.inputs.resize(3);
    conv.inputs[1] = w_name;
    conv.inputs[2] = b_name;
    conv.outputs[0] = bn.outputs[0];
    producer[bn.outputs[0]] = p->second;
    removed[b] = true;
    ++fused;
  }
  if (fused > 0) {
    std::vector<NodeDef> kept;
    kept.reserve(def->nodes.size() - fused);
    for (std::size_t i = 0; i < def->nodes.size(); ++i) {
      if (!removed[i]) kept.push_back(std::move(def->nodes[i]));
    }
    def->nodes = std::move(kept);
  }
  return fused;
}

absl::StatusOr<int> FuseConvActivation(GraphDef* def) {
  absl::flat_hash_map<std::string, const Initializer*> inits;
  for (const Initializer& init : def->initializers) inits[init.name] = &init;
  absl::flat_hash_map<std::string, int> producer, readers;
  for (int i = 0; i < static_cast<int>(def->nodes.size()); ++i) {
    for (const std::string& in : def->nodes[i].inputs) ++readers[in];
    for (const std::string& out : def->nodes[i].outputs) {
      if (!out.empty()) producer[out] = i;
    }
  }
  absl::flat_hash_set<std::string> graph_outputs;
  for (const TensorSpec& o : def->outputs) graph_outputs.insert(o.name);

  // A Clip bound: absent (true, *v untouched) or a one-element FP32 initializer.
  auto clip_bound = [&](const NodeDef& clip, std::size_t i, float* v) {
    if (clip.inputs.size() <= i || clip.inputs[i].empty()) return true;
    auto it = inits.find(clip.inputs[i]);
    if (it == inits.end()) return false;
    const Initializer& init = *it->second;
    if (init.dtype != DType::kFp32 || kernels::NumElements(init.shape) != 1 ||
        init.bytes.size() != sizeof(float)) {
      return false;
    }
    std::memcpy(v, init.bytes.data(), sizeof(float));
    return !std::isnan(*v);
  };

  std::vector<bool> removed(def->nodes.size(), false);
  int fused = 0;
  for (int a = 0; a < static_cast<int>(def->nodes.size()); ++a) {
    const NodeDef& act = def->nodes[a];
    if (!IsDefaultDomain(act) || act.inputs.empty() || act.outputs.size() != 1 ||
        act.outputs[0].empty()) {
      continue;
    }
    float lo = -std::numeric_limits<float>::infinity();
    float hi = std::numeric_limits<float>::infinity();
    if (act.op_type == "Clip") {
      if (act.inputs.size() > 3 || !clip_bound(act, 1, &lo) || !clip_bound(act, 2, &hi)) continue;
    } else if (act.op_type != "Relu" && act.op_type != "Sigmoid" &&
               !(act.op_type == "HardSwish" && def->opset >= 14)) {  // HardSwish is opset 14's
      continue;
    } else if (act.inputs.size() != 1) {
      continue;
    }
    const std::string& mid = act.inputs[0];
    auto p = producer.find(mid);
    if (p == producer.end() || removed[p->second] || readers[mid] != 1 ||
        graph_outputs.contains(mid)) {
      continue;
    }
    NodeDef& conv = def->nodes[p->second];
    if (conv.op_type != "Conv" || !IsDefaultDomain(conv) || conv.outputs.size() != 1 ||
        conv.attrs.contains(kernels::kConvActivationAttr)) {
      continue;
    }
    conv.attrs[kernels::kConvActivationAttr] = act.op_type;
    if (act.op_type == "Clip") {
      conv.attrs[kernels::kConvActivationMinAttr] = lo;
      conv.attrs[kernels::kConvActivationMaxAttr] = hi;
    }
    conv.outputs[0] = act.outputs[0];
    producer[act.outputs[0]] = p->second;
    removed[a] = true;
    ++fused;
  }
  if (fused > 0) {
    std::vector<NodeDef> kept;
    kept.reserve(def->nodes.size() - fused);
    for (std::size_t i = 0; i < def->nodes.size(); ++i) {
      if (!removed[i]) kept.push_back(std::move(def->nodes[i]));
    }
    def->nodes = std::move(kept);
  }
  return fused;
}

}  // namespace ndserve::engine
