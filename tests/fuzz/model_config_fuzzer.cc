// libFuzzer target: config.pbtxt text -> ParseModelConfig -> reconciliation with a fixed
// model (examples/models/mlp, read once) as a load does it (ResolveSignature and
// EffectiveConfig) -> the config's text form (the ModelConfig RPC) parsed back.
//
// Whatever the text, parsing and reconciling return a Status (INVALID_ARGUMENT with a
// message, never crash, hang or leak); a config that parses prints to text that parses
// again to the same config.
//
// Build and run: see tests/fuzz/CMakeLists.txt; e.g.
//   build-fuzz/tests/fuzz/model_config_fuzzer /tmp/config_corpus tests/fuzz/corpus/model_config
//   -max_total_time=600 -timeout=10
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/model_config.h"
#include "engine/onnx_loader.h"
#include "engine/signature.h"

#ifndef NDSERVE_SOURCE_DIR
#error "NDSERVE_SOURCE_DIR must name the source tree (tests/fuzz/CMakeLists.txt sets it)"
#endif

namespace {

void Check(bool condition, const char* what, const absl::Status& status = absl::OkStatus()) {
  if (!condition) {
    std::fprintf(stderr, "invariant violated: %s (%s)\n", what, status.ToString().c_str());
    std::abort();
  }
}

void CheckInvalid(const absl::Status& status) {
  Check(status.code() == absl::StatusCode::kInvalidArgument, "error is not INVALID_ARGUMENT",
        status);
  Check(!status.message().empty(), "error without a message", status);
}

const ndserve::engine::Graph& FixedModel() {
  static const ndserve::engine::Graph* graph = [] {
    absl::StatusOr<ndserve::engine::Graph> g =
        ndserve::engine::LoadOnnxGraph(NDSERVE_SOURCE_DIR "/examples/models/mlp/1/model.onnx");
    Check(g.ok(), "loading the fixed model", g.status());
    return new ndserve::engine::Graph(*std::move(g));
  }();
  return *graph;
}

bool SameTensors(const std::vector<ndserve::engine::TensorSpec>& a,
                 const std::vector<ndserve::engine::TensorSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].dtype != b[i].dtype || a[i].dims != b[i].dims) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ndserve::engine::ModelConfig> config =
      ndserve::engine::ParseModelConfig(text, "config.pbtxt");
  if (!config.ok()) {
    CheckInvalid(config.status());
    return 0;
  }
  Check(config->InstanceCount() >= 1, "instance count below 1");

  // Printing and parsing back keeps every field the server uses.
  const std::string printed = ndserve::engine::ModelConfigToText(*config);
  absl::StatusOr<ndserve::engine::ModelConfig> again =
      ndserve::engine::ParseModelConfig(printed, "printed");
  Check(again.ok(), "the printed config does not parse", again.status());
  Check(again->name == config->name && again->max_batch_size == config->max_batch_size &&
            again->default_model_filename == config->default_model_filename &&
            SameTensors(again->inputs, config->inputs) &&
            SameTensors(again->outputs, config->outputs) &&
            again->instance_groups.size() == config->instance_groups.size() &&
            again->dynamic_batching.has_value() == config->dynamic_batching.has_value() &&
            again->version_policy.kind == config->version_policy.kind,
        "the printed config parses to another config");

  absl::StatusOr<ndserve::engine::ModelSignature> signature =
      ndserve::engine::ResolveSignature(FixedModel(), &*config);
  if (!signature.ok()) {
    CheckInvalid(signature.status());
    return 0;
  }
  const ndserve::engine::ModelConfig effective =
      ndserve::engine::EffectiveConfig(*signature, &*config, "mlp");
  Check(effective.inputs.size() == FixedModel().inputs().size(), "effective input count");
  Check(effective.outputs.size() == FixedModel().outputs().size(), "effective output count");
  return 0;
}
