#include "engine/half_precision.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cast_convert.h"
#include "kernels/node_attrs.h"

namespace ndserve::engine {
namespace {

bool IsHalf(DType dtype) { return dtype == DType::kFp16 || dtype == DType::kBf16; }

// Whether an ONNX TensorProto type number (Cast's `to`, a `dtype` attribute) is a
// 16-bit float.
bool IsHalfOnnxType(int64_t onnx_type) {
  absl::StatusOr<DType> dtype = kernels::DTypeFromOnnx(onnx_type);
  return dtype.ok() && IsHalf(*dtype);
}

absl::Status WidenInitializer(Initializer& init) {
  if (init.bytes.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("initializer '", init.name, "' has ",
                                                   init.bytes.size(), " bytes, not a whole number of ",
                                                   DTypeName(init.dtype), " elements"));
  }
  const std::size_t n = init.bytes.size() / 2;
  std::string wide(n * sizeof(float), '\0');
  for (std::size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, init.bytes.data() + 2 * i, 2);
    const float f = init.dtype == DType::kFp16 ? kernels::HalfToFloat(kernels::Half{bits})
                                               : kernels::BFloat16ToFloat(kernels::BFloat16{bits});
    std::memcpy(wide.data() + i * sizeof(float), &f, sizeof(float));
  }
  init.bytes = std::move(wide);
  init.dtype = DType::kFp32;
  return absl::OkStatus();
}

// The attributes of one node that name or hold a 16-bit float type, made FP32.
int WidenAttributes(NodeDef& node) {
  int changed = 0;
  for (auto& [name, value] : node.attrs) {
    if (auto* tensor = std::get_if<kernels::HostValue>(&value); tensor && IsHalf(tensor->dtype)) {
      tensor->dtype = DType::kFp32;  // its elements are already held as doubles
      ++changed;
    } else if (auto* type = std::get_if<int64_t>(&value);
               type && (name == "dtype" || (name == "to" && node.op_type == "Cast")) &&
               IsHalfOnnxType(*type)) {
      *type = kernels::DTypeToOnnx(DType::kFp32);
      ++changed;
    }
  }
  return changed;
}

// Names for the values this pass adds, unused by the graph.
class FreshNames {
 public:
  explicit FreshNames(const GraphDef& def) {
    for (const TensorSpec& s : def.inputs) used_.insert(s.name);
    for (const TensorSpec& s : def.outputs) used_.insert(s.name);
    for (const Initializer& i : def.initializers) used_.insert(i.name);
    for (const NodeDef& n : def.nodes) {
      used_.insert(n.outputs.begin(), n.outputs.end());
      used_.insert(n.name);
    }
  }
  std::string Make(const std::string& base) {
    std::string name = base;
    for (int i = 2; !used_.insert(name).second; ++i) name = absl::StrCat(base, "_", i);
    return name;
  }

 private:
  absl::flat_hash_set<std::string> used_;
};

NodeDef CastNode(std::string name, std::string from, std::string to, DType dtype) {
  NodeDef cast;
  cast.name = std::move(name);
  cast.op_type = "Cast";
  cast.inputs = {std::move(from)};
  cast.outputs = {std::move(to)};
  cast.attrs["to"] = kernels::DTypeToOnnx(dtype);
  return cast;
}

}  // namespace

absl::StatusOr<int> ComputeHalfPrecisionInFp32(GraphDef* def) {
  int changed = 0;
  for (Initializer& init : def->initializers) {
    if (!IsHalf(init.dtype)) continue;
    NDS_RETURN_IF_ERROR(WidenInitializer(init));
    ++changed;
  }
  for (NodeDef& node : def->nodes) changed += WidenAttributes(node);

  FreshNames names(*def);
  absl::flat_hash_set<std::string> inputs;
  for (const TensorSpec& s : def->inputs) inputs.insert(s.name);
  // Old name -> new name, for node inputs (the inputs' FP32 copies) and for producers
  // and readers of the outputs (the FP32 values the outputs are cast from).
  absl::flat_hash_map<std::string, std::string> read_as, produced_as;
  std::vector<NodeDef> front, back;
  for (const TensorSpec& s : def->inputs) {
    if (!IsHalf(s.dtype)) continue;
    const std::string wide = names.Make(absl::StrCat(s.name, "/fp32"));
    front.push_back(CastNode(names.Make(absl::StrCat(s.name, "/to_fp32")), s.name, wide,
                             DType::kFp32));
    read_as[s.name] = wide;
    ++changed;
  }
  for (const TensorSpec& s : def->outputs) {
    // An input passed straight through keeps its type; a name listed twice is cast once.
    if (!IsHalf(s.dtype) || inputs.contains(s.name) || produced_as.contains(s.name)) continue;
    const std::string wide = names.Make(absl::StrCat(s.name, "/fp32"));
    back.push_back(CastNode(names.Make(absl::StrCat(s.name, "/to_", DTypeName(s.dtype))), wide,
                            s.name, s.dtype));
    produced_as[s.name] = wide;
    ++changed;
  }
  if (read_as.empty() && produced_as.empty()) return changed;
  for (NodeDef& node : def->nodes) {
    for (std::string& in : node.inputs) {
      if (auto it = read_as.find(in); it != read_as.end()) in = it->second;
      if (auto it = produced_as.find(in); it != produced_as.end()) in = it->second;
    }
    for (std::string& out : node.outputs) {
      if (auto it = produced_as.find(out); it != produced_as.end()) out = it->second;
    }
  }
  for (Initializer& init : def->initializers) {  // an output that is a constant
    if (auto it = produced_as.find(init.name); it != produced_as.end()) init.name = it->second;
  }
  front.insert(front.end(), std::make_move_iterator(def->nodes.begin()),
               std::make_move_iterator(def->nodes.end()));
  front.insert(front.end(), std::make_move_iterator(back.begin()),
               std::make_move_iterator(back.end()));
  def->nodes = std::move(front);
  return changed;
}

}  // namespace ndserve::engine
