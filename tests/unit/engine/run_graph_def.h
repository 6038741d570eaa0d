#ifndef NDSERVE_TESTS_UNIT_ENGINE_RUN_GRAPH_DEF_H_
#define NDSERVE_TESTS_UNIT_ENGINE_RUN_GRAPH_DEF_H_

// Running a small GraphDef node by node through the real kernels, for the fusion tests
// (engine/fusion.h): the unfused and the fused graph side by side on every test device.

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/status_macros.h"
#include "engine/graph.h"
#include "kernels/node_attrs.h"
#include "kernels/op_kind.h"
#include "tests/unit/kernels/kernel_test_util.h"

namespace ndserve::engine::testing {

inline kernels::testing::HostTensor ToHost(const Initializer& init) {
  kernels::testing::HostTensor t{init.dtype, init.shape, std::vector<uint8_t>(init.bytes.size())};
  std::memcpy(t.bytes.data(), init.bytes.data(), init.bytes.size());
  return t;
}

// Runs `def`'s nodes in file order through the kernels of `device`, one at a time, and
// returns graph output 0. Enough for the straight-line graphs of these tests.
inline absl::StatusOr<kernels::testing::HostTensor> RunDef(
    const GraphDef& def, Device device, const std::vector<kernels::testing::HostTensor>& inputs) {
  using kernels::testing::HostTensor;
  kernels::testing::DeviceRunner runner(device);
  absl::flat_hash_map<std::string, HostTensor> values;
  for (const Initializer& init : def.initializers) values[init.name] = ToHost(init);
  for (std::size_t i = 0; i < inputs.size(); ++i) values[def.inputs[i].name] = inputs[i];
  for (const NodeDef& n : def.nodes) {
    NDS_ASSIGN_OR_RETURN(kernels::OpKind op,
                         kernels::OpKindFromOnnx(n.op_type, n.domain, def.opset));
    const kernels::OpInfo& info = kernels::GetOpInfo(op);
    std::vector<HostTensor> in;
    std::vector<std::optional<kernels::HostValue>> host(n.inputs.size());
    for (std::size_t j = 0; j < n.inputs.size(); ++j) {
      if (n.inputs[j].empty()) continue;
      const HostTensor& t = values.at(n.inputs[j]);
      if (info.IsHostInput(static_cast<int>(j))) {
        NDS_ASSIGN_OR_RETURN(host[j], kernels::HostValue::FromBytes(t.dtype, t.shape, t.bytes));
      } else {
        in.push_back(t);
      }
    }
    NDS_ASSIGN_OR_RETURN(
        kernels::OpAttrs attrs,
        kernels::BuildOpAttrs(op, def.opset, n.attrs, kernels::HostInputs(std::move(host))));
    NDS_ASSIGN_OR_RETURN(std::vector<HostTensor> out, runner.Run(op, in, attrs));
    values[n.outputs[0]] = std::move(out[0]);
  }
  return values.at(def.outputs[0].name);
}

inline std::vector<std::string> OpTypes(const GraphDef& def) {
  std::vector<std::string> ops;
  for (const NodeDef& n : def.nodes) ops.push_back(n.op_type);
  return ops;
}

}  // namespace ndserve::engine::testing

#endif  // NDSERVE_TESTS_UNIT_ENGINE_RUN_GRAPH_DEF_H_
