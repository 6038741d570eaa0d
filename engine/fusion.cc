#include "engine/fusion.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/fusion_util.h"
#include "kernels/conv_activation.h"
#include "kernels/op_attrs.h"

namespace ndserve::engine {
namespace {

using fusion::DropNodes;
using fusion::IsDefaultDomain;
using fusion::IsNode;

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
  if (fused > 0) DropNodes(def, removed);
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
  // The Conv that writes `v` as its only output and carries no activation yet, or null.
  auto plain_conv = [&](const std::string& v) -> NodeDef* {
    auto p = producer.find(v);
    if (p == producer.end() || removed[p->second] || graph_outputs.contains(v)) return nullptr;
    NodeDef& conv = def->nodes[p->second];
    if (conv.op_type != "Conv" || !IsDefaultDomain(conv) || conv.outputs.size() != 1 ||
        conv.attrs.contains(kernels::kConvActivationAttr)) {
      return nullptr;
    }
    return &conv;
  };
  // SiLU first: Mul(c, Sigmoid(c)) (either order) of a Conv's output c that these two
  // alone read.
  for (int m = 0; m < static_cast<int>(def->nodes.size()); ++m) {
    const NodeDef& mul = def->nodes[m];
    if (mul.op_type != "Mul" || !IsDefaultDomain(mul) || mul.inputs.size() != 2 ||
        mul.outputs.size() != 1 || mul.outputs[0].empty()) {
      continue;
    }
    for (int side = 0; side < 2; ++side) {
      const std::string& sig_out = mul.inputs[side];
      const std::string& c = mul.inputs[1 - side];
      auto s = producer.find(sig_out);
      if (s == producer.end() || removed[s->second] || readers[sig_out] != 1 ||
          graph_outputs.contains(sig_out)) {
        continue;
      }
      const NodeDef& sig = def->nodes[s->second];
      if (sig.op_type != "Sigmoid" || !IsDefaultDomain(sig) || sig.inputs.size() != 1 ||
          sig.inputs[0] != c || readers[c] != 2) {
        continue;
      }
      NodeDef* conv = plain_conv(c);
      if (conv == nullptr) continue;
      conv->attrs[kernels::kConvActivationAttr] = std::string("Silu");
      conv->outputs[0] = mul.outputs[0];
      producer[mul.outputs[0]] = producer[c];
      removed[s->second] = true;
      removed[m] = true;
      ++fused;
      break;
    }
  }
  for (int a = 0; a < static_cast<int>(def->nodes.size()); ++a) {
    if (removed[a]) continue;
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
    if (readers[mid] != 1) continue;
    NodeDef* conv_p = plain_conv(mid);
    if (conv_p == nullptr) continue;
    NodeDef& conv = *conv_p;
    conv.attrs[kernels::kConvActivationAttr] = act.op_type;
    if (act.op_type == "Clip") {
      conv.attrs[kernels::kConvActivationMinAttr] = lo;
      conv.attrs[kernels::kConvActivationMaxAttr] = hi;
    }
    conv.outputs[0] = act.outputs[0];
    producer[act.outputs[0]] = producer[mid];
    removed[a] = true;
    ++fused;
  }
  if (fused > 0) DropNodes(def, removed);
  return fused;
}

namespace {

// The graph's value names, who produces and who reads them, as one Gemm-family rewrite
// sees them; kept current as nodes are folded away.
class EpilogueFuser {
 public:
  explicit EpilogueFuser(GraphDef* def) : def_(def), removed_(def->nodes.size(), false) {
    for (int i = 0; i < static_cast<int>(def->initializers.size()); ++i) {
      init_index_[def->initializers[i].name] = i;
    }
    for (int i = 0; i < static_cast<int>(def->nodes.size()); ++i) {
      for (const std::string& in : def->nodes[i].inputs) {
        if (!in.empty()) readers_[in].push_back(i);
      }
      for (const std::string& out : def->nodes[i].outputs) {
        if (!out.empty()) producer_[out] = i;
      }
    }
    for (const TensorSpec& o : def->outputs) graph_outputs_.insert(o.name);
  }

  int FuseBiases() {
    int fused = 0;
    for (int i = 0; i < static_cast<int>(def_->nodes.size()); ++i) {
      if (removed_[i]) continue;
      const NodeDef& add = def_->nodes[i];
      if (!IsNode(add, "Add", 2, 1)) continue;
      for (int side = 0; side < 2; ++side) {
        const int mm = OnlyReaderProducer(add.inputs[side], i);
        if (mm < 0 || !IsNode(def_->nodes[mm], "MatMul", 2, 1) || Fused(def_->nodes[mm])) continue;
        const Initializer* bias = Fp32Init(add.inputs[1 - side]);
        const Initializer* b = Fp32Init(def_->nodes[mm].inputs[1]);
        if (bias == nullptr || b == nullptr || bias->shape.size() != 1 || b->shape.size() < 2 ||
            b->shape.back() != bias->shape[0]) {
          continue;
        }
        NodeDef& matmul = def_->nodes[mm];
        matmul.inputs.push_back(add.inputs[1 - side]);
        matmul.attrs[kernels::kFusedMatMulBiasAttr] = int64_t{1};
        Replace(mm, {i});
        ++fused;
        break;
      }
    }
    return fused;
  }

  int FuseActivations() {
    int fused = 0;
    for (int g = 0; g < static_cast<int>(def_->nodes.size()); ++g) {
      if (removed_[g]) continue;
      const NodeDef& node = def_->nodes[g];
      if (!(IsNode(node, "Gemm", 2, 1) || IsNode(node, "Gemm", 3, 1) ||
            IsNode(node, "MatMul", 2, 1) || IsNode(node, "MatMul", 3, 1)) ||
          node.attrs.contains(kernels::kFusedActivationAttr)) {
        continue;
      }
      const std::string& y = node.outputs[0];
      if (graph_outputs_.contains(y)) continue;
      const std::vector<int> readers = Readers(y);  // a copy: Replace edits readers_
      if (readers.size() == 1) {
        fused +=
            FuseRelu(g, readers[0]) || FuseClip(g, readers[0]) || FuseDiv(g, readers[0]) ? 1 : 0;
      } else if (readers.size() == 2 && FuseGelu(g, readers)) {
        fused += 5;
      }
    }
    return fused;
  }

  // Drops the folded nodes from the GraphDef.
  void Compact() { DropNodes(def_, removed_); }

 private:
  static bool Fused(const NodeDef& n) {
    return n.attrs.contains(kernels::kFusedActivationAttr) ||
           n.attrs.contains(kernels::kFusedMatMulBiasAttr);
  }

  const std::vector<int>& Readers(const std::string& name) const {
    static const std::vector<int> kNone;
    auto it = readers_.find(name);
    return it == readers_.end() ? kNone : it->second;
  }

  // The producer of `name` when node `reader` is its only reader and it is no graph
  // output; -1 otherwise.
  int OnlyReaderProducer(const std::string& name, int reader) const {
    auto p = producer_.find(name);
    if (p == producer_.end() || removed_[p->second] || graph_outputs_.contains(name)) return -1;
    const std::vector<int>& r = Readers(name);
    return r.size() == 1 && r[0] == reader ? p->second : -1;
  }

  // The only reader of `name` (not a graph output), or -1.
  int OnlyReader(const std::string& name) const {
    if (graph_outputs_.contains(name)) return -1;
    const std::vector<int>& r = Readers(name);
    return r.size() == 1 ? r[0] : -1;
  }

  const Initializer* Fp32Init(const std::string& name) const {
    auto it = init_index_.find(name);
    if (it == init_index_.end()) return nullptr;
    const Initializer& init = def_->initializers[it->second];
    if (init.dtype != DType::kFp32 ||
        init.bytes.size() != static_cast<std::size_t>(kernels::NumElements(init.shape)) * 4) {
      return nullptr;
    }
    return &init;
  }

  // The value of a rank-0 FP32 initializer.
  std::optional<float> Scalar(const std::string& name) const {
    const Initializer* init = Fp32Init(name);
    if (init == nullptr || !init->shape.empty()) return std::nullopt;
    float v;
    std::memcpy(&v, init->bytes.data(), sizeof(v));
    return v;
  }

  // Node `g` takes over the output of the last of `folded` (a chain that ends the
  // pattern); the folded nodes go.
  void Replace(int g, const std::vector<int>& folded) {
    const std::string out = def_->nodes[folded.back()].outputs[0];
    def_->nodes[g].outputs[0] = out;
    producer_[out] = g;
    for (int f : folded) removed_[f] = true;
    // The bias (if any) is now read by g rather than by a folded node.
    for (const std::string& in : def_->nodes[g].inputs) {
      std::vector<int>& r = readers_[in];
      for (int& reader : r) {
        if (reader >= 0 && removed_[reader]) reader = g;
      }
    }
  }

  void SetActivation(int g, const char* act, std::vector<float> params) {
    NodeDef& n = def_->nodes[g];
    n.attrs[kernels::kFusedActivationAttr] = std::string(act);
    if (!params.empty()) n.attrs[kernels::kFusedActivationParamsAttr] = std::move(params);
  }

  bool FuseRelu(int g, int r) {
    if (!IsNode(def_->nodes[r], "Relu", 1, 1)) return false;
    SetActivation(g, "Relu", {});
    Replace(g, {r});
    return true;
  }

  bool FuseClip(int g, int r) {
    const NodeDef& clip = def_->nodes[r];
    if (clip.op_type != "Clip" || !IsDefaultDomain(clip) || clip.inputs.empty() ||
        clip.inputs.size() > 3 || clip.outputs.size() != 1 || clip.outputs[0].empty()) {
      return false;
    }
    float bounds[2] = {-std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::infinity()};
    for (std::size_t i = 1; i < clip.inputs.size(); ++i) {
      if (clip.inputs[i].empty()) continue;
      const std::optional<float> v = Scalar(clip.inputs[i]);
      if (!v.has_value()) return false;
      bounds[i - 1] = *v;
    }
    SetActivation(g, "Clip", {bounds[0], bounds[1]});
    Replace(g, {r});
    return true;
  }

  // Div(product, scalar initializer): attention's scores over sqrt(head size).
  bool FuseDiv(int g, int r) {
    const NodeDef& div = def_->nodes[r];
    if (!IsNode(div, "Div", 2, 1) || div.inputs[0] != def_->nodes[g].outputs[0] ||
        div.inputs[1] == div.inputs[0]) {
      return false;
    }
    const std::optional<float> d = Scalar(div.inputs[1]);
    if (!d.has_value()) return false;
    SetActivation(g, "Div", {*d});
    Replace(g, {r});
    return true;
  }

  // x = node g's output, read by exactly `readers` (two nodes).
  bool FuseGelu(int g, const std::vector<int>& readers) {
    const std::string& x = def_->nodes[g].outputs[0];
    int div = -1, half_mul = -1;
    for (int r : readers) {
      const NodeDef& n = def_->nodes[r];
      if (IsNode(n, "Div", 2, 1) && n.inputs[0] == x && n.inputs[1] != x) div = r;
      if (IsNode(n, "Mul", 2, 1) && (n.inputs[0] == x) != (n.inputs[1] == x)) half_mul = r;
    }
    if (div < 0 || half_mul < 0) return false;
    const NodeDef& dn = def_->nodes[div];
    const NodeDef& hn = def_->nodes[half_mul];
    const std::optional<float> d = Scalar(dn.inputs[1]);
    const std::optional<float> a = Scalar(hn.inputs[hn.inputs[0] == x ? 1 : 0]);
    const int erf = OnlyReader(dn.outputs[0]);
    if (!d || !a || erf < 0 || !IsNode(def_->nodes[erf], "Erf", 1, 1)) return false;
    const int add = OnlyReader(def_->nodes[erf].outputs[0]);
    if (add < 0 || !IsNode(def_->nodes[add], "Add", 2, 1)) return false;
    const NodeDef& an = def_->nodes[add];
    const bool erf_first = an.inputs[0] == def_->nodes[erf].outputs[0];
    const std::optional<float> c = Scalar(an.inputs[erf_first ? 1 : 0]);
    const int mul = OnlyReader(an.outputs[0]);
    if (!c || mul < 0 || !IsNode(def_->nodes[mul], "Mul", 2, 1)) return false;
    const NodeDef& mn = def_->nodes[mul];
    const bool pair = (mn.inputs[0] == hn.outputs[0] && mn.inputs[1] == an.outputs[0]) ||
                      (mn.inputs[1] == hn.outputs[0] && mn.inputs[0] == an.outputs[0]);
    if (!pair || OnlyReader(hn.outputs[0]) != mul) return false;
    SetActivation(g, "Gelu", {*a, *d, *c});
    Replace(g, {div, half_mul, erf, add, mul});
    return true;
  }

  GraphDef* def_;
  std::vector<bool> removed_;
  absl::flat_hash_map<std::string, int> init_index_;
  absl::flat_hash_map<std::string, int> producer_;
  absl::flat_hash_map<std::string, std::vector<int>> readers_;
  absl::flat_hash_set<std::string> graph_outputs_;
};

}  // namespace

absl::StatusOr<int> FuseGemmEpilogues(GraphDef* def) {
  EpilogueFuser fuser(def);
  const int fused = fuser.FuseBiases() + fuser.FuseActivations();
  if (fused > 0) fuser.Compact();
  return fused;
}

}  // namespace ndserve::engine
