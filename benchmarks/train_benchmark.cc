// Training steps per second of the example models through train/ (docs/design.md §10),
// the ndserve half of the comparison with benchmarks/train_torch_bench.py (same models,
// batch, loss and optimizer; run both with one thread: OPENBLAS_NUM_THREADS=1).
//
//   train_benchmark [benchmark flags]      (from the source root, or NDSERVE_SOURCE_DIR)
//
// One step: a batch manager under the trainer manager, the forward to the logits
// (fc2), the loss, Backward, SGD (lr 0.01), ClearGrad, and the batch manager's Close.
// Every FP32 initializer is trained; recsys's tables get row gradients.

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/logging.h"
#include "benchmark/benchmark.h"
#include "engine/graph.h"
#include "engine/onnx_loader.h"
#include "memory/memory_system.h"
#include "train/losses.h"
#include "train/optimizer.h"
#include "train/recorded_graph.h"

namespace ndserve::train {
namespace {

constexpr std::int64_t kBatch = 256;

std::string ModelPath(const std::string& name) {
  const char* root = std::getenv("NDSERVE_SOURCE_DIR");
  return std::string(root != nullptr ? root : ".") + "/examples/models/" + name + "/1/model.onnx";
}

template <typename T>
T Check(absl::StatusOr<T> v) {
  if (!v.ok()) {
    LOG(ERROR) << v.status();
    std::exit(1);
  }
  return *std::move(v);
}

void BM_TrainStep(benchmark::State& state, const std::string& model) {
  MemorySystem memory;
  auto trainer = Check(memory.NewBaseManager(Device::Cpu(), ManagerLevel::kTrainer, "trainer"));
  absl::StatusOr<engine::GraphDef> def = engine::ReadOnnxGraphDef(ModelPath(model));
  if (!def.ok()) {
    state.SkipWithError(std::string(def.status().message()).c_str());
    return;
  }
  engine::Graph graph = Check(engine::Graph::Build(*std::move(def)));
  absl::StatusOr<RecordedGraph> g = RecordedGraph::Create(graph, {}, *trainer);
  if (!g.ok()) {
    state.SkipWithError(std::string(g.status().message()).c_str());
    return;
  }
  auto sgd = Check(Sgd::Create(g->parameters(), SgdOptions{0.01f}, *trainer));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const bool recsys = model == "recsys";
  std::vector<float> x(static_cast<std::size_t>(kBatch * (recsys ? 13 : 64)));
  for (float& v : x) v = normal(rng);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(kBatch * 4 * 8));
  std::uniform_int_distribution<std::int64_t> row(0, 99999);
  for (std::int64_t& v : ids) v = row(rng);
  std::vector<std::int64_t> labels(kBatch);
  std::vector<float> clicks(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) {
    labels[i] = i % 10;
    clicks[i] = static_cast<float>(i % 2);
  }
  for (auto _ : state) {
    auto batch = Check(trainer->NewSubManager(ManagerLevel::kBatch, "step"));
    std::vector<NDArray> inputs;
    Variable target;
    if (recsys) {
      inputs.push_back(Check(batch->FromHostValues<std::int64_t>({kBatch, 4, 8}, ids)));
      inputs.push_back(Check(batch->FromHostValues<float>({kBatch, 13}, x)));
      target = Variable::Constant(Check(batch->FromHostValues<float>({kBatch, 1}, clicks)));
    } else {
      inputs.push_back(Check(batch->FromHostValues<float>({kBatch, 64}, x)));
      target = Variable::Constant(Check(batch->FromHostValues<std::int64_t>({kBatch}, labels)));
    }
    Variable logits = Check(g->Forward(*batch, inputs, {"fc2"}))[0];
    Variable loss = recsys ? Check(BceWithLogitsLoss(*batch, logits, target))
                           : Check(CrossEntropyLoss(*batch, logits, target));
    absl::Status status = Backward(loss, *batch);
    if (status.ok()) status = sgd->Step();
    if (status.ok()) status = ClearGrad(sgd->parameters());
    if (status.ok()) status = batch->Close();
    if (!status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      return;
    }
  }
  state.counters["steps/s"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_TrainStep, mlp, std::string("mlp"))->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_TrainStep, recsys, std::string("recsys"))->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace ndserve::train

BENCHMARK_MAIN();
