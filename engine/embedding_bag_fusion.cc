// FuseEmbeddingBags (engine/fusion.h): Gather of table rows + ReduceMean over the bag
// becomes one Gather with kernels::kFusedBagMeanAttr, folding the Gather that picked the
// feature's ids out of a [batch, features, bag] input where there is one.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "engine/fusion.h"
#include "engine/fusion_util.h"
#include "kernels/op_attrs.h"

namespace ndserve::engine {
namespace {

using fusion::DropNodes;
using fusion::IsNode;

// An INT attribute, `fallback` when absent; nullopt when it holds another kind.
std::optional<int64_t> IntAttr(const NodeDef& n, const char* name, int64_t fallback) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return fallback;
  if (const int64_t* v = std::get_if<int64_t>(&it->second)) return *v;
  return std::nullopt;
}

class BagFuser {
 public:
  explicit BagFuser(GraphDef* def) : def_(def), removed_(def->nodes.size(), false) {
    for (const Initializer& init : def->initializers) inits_[init.name] = &init;
    for (const TensorSpec& in : def->inputs) inputs_[in.name] = &in;
    for (const TensorSpec& out : def->outputs) outputs_.insert(out.name);
    for (int i = 0; i < static_cast<int>(def->nodes.size()); ++i) {
      for (const std::string& in : def->nodes[i].inputs) ++readers_[in];
      for (const std::string& out : def->nodes[i].outputs) producer_[out] = i;
    }
  }

  int Run() {
    int fused = 0;
    for (int r = 0; r < static_cast<int>(def_->nodes.size()); ++r) fused += TryFuse(r);
    if (fused > 0) DropNodes(def_, removed_);
    return fused;
  }

 private:
  // Read by one node and no graph output: a value the rewrite may remove.
  bool Private(const std::string& value) const {
    auto it = readers_.find(value);
    return it != readers_.end() && it->second == 1 && !outputs_.contains(value);
  }

  int Producer(const std::string& value) const {
    auto it = producer_.find(value);
    return it == producer_.end() || removed_[it->second] ? -1 : it->second;
  }

  // A graph input of integer ids with `rank` dims; nullptr otherwise.
  const TensorSpec* IdsInput(const std::string& name, std::size_t rank) const {
    auto it = inputs_.find(name);
    if (it == inputs_.end()) return nullptr;
    const TensorSpec& s = *it->second;
    const bool ints = s.dtype == DType::kInt64 || s.dtype == DType::kInt32;
    return ints && !s.any_rank && s.dims.size() == rank ? &s : nullptr;
  }

  // A one-element INT64 or INT32 initializer's value.
  std::optional<int64_t> ScalarIndex(const std::string& name) const {
    auto it = inits_.find(name);
    if (it == inits_.end()) return std::nullopt;
    const Initializer& init = *it->second;
    if (!init.shape.empty()) return std::nullopt;
    if (init.dtype == DType::kInt64 && init.bytes.size() == sizeof(int64_t)) {
      int64_t v;
      std::memcpy(&v, init.bytes.data(), sizeof(v));
      return v;
    }
    if (init.dtype == DType::kInt32 && init.bytes.size() == sizeof(int32_t)) {
      int32_t v;
      std::memcpy(&v, init.bytes.data(), sizeof(v));
      return v;
    }
    return std::nullopt;
  }

  // Node `r` as the ReduceMean ending a bag; 1 when it was fused.
  int TryFuse(int r) {
    const NodeDef& mean = def_->nodes[r];
    if (removed_[r] || !IsNode(mean, "ReduceMean", 1, 1)) return 0;
    auto axes = mean.attrs.find("axes");
    const std::vector<int64_t>* axes_v =
        axes == mean.attrs.end() ? nullptr : std::get_if<std::vector<int64_t>>(&axes->second);
    if (axes_v == nullptr || *axes_v != std::vector<int64_t>{1} ||
        IntAttr(mean, "keepdims", 1) != 0 || !Private(mean.inputs[0])) {
      return 0;
    }
    const int lookup = Producer(mean.inputs[0]);
    if (lookup < 0) return 0;
    const NodeDef& rows = def_->nodes[lookup];
    if (!IsNode(rows, "Gather", 2, 1) || IntAttr(rows, "axis", 0) != 0) return 0;
    auto table = inits_.find(rows.inputs[0]);
    if (table == inits_.end() || table->second->dtype != DType::kFp32 ||
        table->second->shape.size() != 2) {
      return 0;
    }
    // The ids: [batch, bag] as given, or feature f of a [batch, features, bag] input
    // picked by a Gather on axis 1 with a scalar index. Either way their rank is known
    // here, so axis 1 of the rows is the bag.
    const std::string& ids = rows.inputs[1];
    std::string fused_ids = ids;
    int64_t select = -1;
    int picker = -1;
    if (IdsInput(ids, 2) == nullptr) {
      picker = Producer(ids);
      if (picker < 0 || !Private(ids)) return 0;
      const NodeDef& pick = def_->nodes[picker];
      if (!IsNode(pick, "Gather", 2, 1) || IntAttr(pick, "axis", 0) != 1) return 0;
      const TensorSpec* all = IdsInput(pick.inputs[0], 3);
      const std::optional<int64_t> f = ScalarIndex(pick.inputs[1]);
      if (all == nullptr || !f.has_value() || all->dims[1] <= 0) return 0;
      select = *f < 0 ? *f + all->dims[1] : *f;
      if (select < 0 || select >= all->dims[1]) return 0;
      fused_ids = pick.inputs[0];
    }
    NodeDef& g = def_->nodes[lookup];
    g.inputs[1] = fused_ids;
    g.outputs[0] = mean.outputs[0];
    g.attrs[kernels::kFusedBagMeanAttr] = int64_t{1};
    if (select >= 0) g.attrs[kernels::kFusedBagSelectAttr] = select;
    producer_[g.outputs[0]] = lookup;
    removed_[r] = true;
    if (picker >= 0) removed_[picker] = true;
    return 1;
  }

  GraphDef* def_;
  std::vector<bool> removed_;
  absl::flat_hash_map<std::string, const Initializer*> inits_;
  absl::flat_hash_map<std::string, const TensorSpec*> inputs_;
  absl::flat_hash_set<std::string> outputs_;
  absl::flat_hash_map<std::string, int> readers_;
  absl::flat_hash_map<std::string, int> producer_;
};

}  // namespace

absl::StatusOr<int> FuseEmbeddingBags(GraphDef* def) { return BagFuser(def).Run(); }

}  // namespace ndserve::engine
