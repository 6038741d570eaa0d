// libFuzzer target: bytes -> the model loader, as ServedModel::Load runs it on a file:
// ONNX parse -> Conv/BatchNorm fusion -> Graph::Build (ops, opset, shape rules) ->
// signature -> Model::Create (initializers uploaded into a CPU pool) -> one predictor
// and its warm-up run. The memory system has a small limit, so a huge initializer or
// intermediate is refused with RESOURCE_EXHAUSTED instead of allocated.
//
// Whatever the bytes, loading must return a Status with a message and one of the codes
// docs/design.md §4 allows for a bad model (never crash, hang or leak), and once the model
// is closed the pool must hold nothing.
//
// Build and run: see tests/fuzz/CMakeLists.txt; e.g.
//   build-fuzz/tests/fuzz/onnx_model_fuzzer /tmp/onnx_corpus tests/fuzz/corpus/onnx_model
//   -max_total_time=600 -timeout=10
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/model.h"
#include "engine/model_config.h"
#include "engine/onnx_loader.h"
#include "engine/predictor.h"
#include "engine/signature.h"
#include "memory/memory_config.h"
#include "memory/memory_system.h"

namespace {

using ndserve::Device;
using ndserve::MemoryConfig;
using ndserve::MemorySystem;
using ndserve::Pool;

// Big enough for every seed model (the largest, examples/models/mlp, has ~80 KB of
// parameters), small enough that a hostile shape fails fast.
constexpr uint64_t kMemoryLimit = 4 << 20;

void Check(bool condition, const char* what, const absl::Status& status = absl::OkStatus()) {
  if (!condition) {
    std::fprintf(stderr, "invariant violated: %s (%s)\n", what, status.ToString().c_str());
    std::abort();
  }
}

// The codes a model that cannot be served may produce: bad bytes or graph
// (INVALID_ARGUMENT), an op/opset/dtype the engine lacks (UNIMPLEMENTED), the pool's limit
// (RESOURCE_EXHAUSTED), an index or size past a bound (OUT_OF_RANGE).
void CheckLoadError(const absl::Status& status) {
  Check(!status.message().empty(), "error without a message", status);
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kOutOfRange:
      return;
    default:
      Check(false, "unexpected error code for a bad model", status);
  }
}

MemorySystem& Memory() {
  static MemorySystem* memory = [] {
    MemoryConfig config;
    config.limit.unlimited = false;
    config.limit.bytes = kMemoryLimit;
    return new MemorySystem(config);
  }();
  return *memory;
}

absl::Status LoadAndWarmUp(absl::string_view bytes) {
  absl::StatusOr<ndserve::engine::Graph> graph =
      ndserve::engine::LoadOnnxGraphFromBytes(bytes, "fuzz.onnx");
  if (!graph.ok()) return graph.status();
  absl::StatusOr<ndserve::engine::ModelSignature> signature =
      ndserve::engine::ResolveSignature(*graph, nullptr);
  if (!signature.ok()) return signature.status();
  ndserve::engine::ModelConfig config =
      ndserve::engine::EffectiveConfig(*signature, nullptr, "fuzz");
  absl::StatusOr<std::shared_ptr<ndserve::engine::Model>> model = ndserve::engine::Model::Create(
      "fuzz", 1, *std::move(graph), *std::move(signature), std::move(config), Device::Cpu(),
      &Memory());
  if (!model.ok()) return model.status();
  absl::Status status;
  {
    absl::StatusOr<std::unique_ptr<ndserve::engine::Predictor>> predictor =
        ndserve::engine::Predictor::Create(*model, 0);
    status = predictor.status();
    if (status.ok()) status = (*predictor)->WarmUp();
  }
  absl::Status closed = (*model)->Close();
  Check(closed.ok(), "closing the model", closed);
  return status;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<Pool*> pool = Memory().GetPool(Device::Cpu());
  Check(pool.ok(), "CPU pool", pool.status());
  absl::Status status =
      LoadAndWarmUp(absl::string_view(reinterpret_cast<const char*>(data), size));
  if (!status.ok()) CheckLoadError(status);
  Check((*pool)->Stats().allocated_bytes == 0, "pool bytes left after the model closed");
  return 0;
}
