// Training steps per second of the example models through train/ (docs/design.md §10),
// the ndserve half of the comparison with benchmarks/train_torch_bench.py (same models,
// batch, loss and optimizer; run both with one thread: OPENBLAS_NUM_THREADS=1).
//
//   train_benchmark [benchmark flags]      (from the source root, or NDSERVE_SOURCE_DIR)
//   NDSERVE_BENCH_DEVICE=cuda:0 train_benchmark --benchmark_filter=Session
//
// One step: a batch manager under the trainer manager, the forward to the logits
// (fc2), the loss, Backward, SGD (lr 0.01), ClearGrad, and the batch manager's Close.
// Every FP32 initializer is trained; recsys's tables get row gradients.
//
// BM_SessionStep is the same step as a Trainer session runs it (train::TrainingRun on a
// trainer scope of NDSERVE_BENCH_DEVICE, default cpu): the batch copied from host
// memory each step, the gradient norm, on a GPU the run's own stream with its two
// synchronizations, and the loss read back.

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/logging.h"
#include "benchmark/benchmark.h"
#include "engine/graph.h"
#include "engine/onnx_loader.h"
#include "engine/host_tensor.h"
#include "engine/training_scopes.h"
#include "memory/memory_system.h"
#include "train/losses.h"
#include "train/training_run.h"
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

// One batch of 256: features (mlp's 64 or recsys's 13 dense), recsys's 4 x 8 ids over
// 100,000-row tables, class labels for mlp and clicks for recsys. The same every step.
struct StepData {
  std::vector<float> x;
  std::vector<std::int64_t> ids;
  std::vector<std::int64_t> labels;
  std::vector<float> clicks;
};

StepData MakeStepData(bool recsys) {
  StepData d;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  d.x.resize(static_cast<std::size_t>(kBatch * (recsys ? 13 : 64)));
  for (float& v : d.x) v = normal(rng);
  d.ids.resize(static_cast<std::size_t>(kBatch * 4 * 8));
  std::uniform_int_distribution<std::int64_t> row(0, 99999);
  for (std::int64_t& v : d.ids) v = row(rng);
  d.labels.resize(kBatch);
  d.clicks.resize(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) {
    d.labels[static_cast<std::size_t>(i)] = i % 10;
    d.clicks[static_cast<std::size_t>(i)] = static_cast<float>(i % 2);
  }
  return d;
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
  const bool recsys = model == "recsys";
  const StepData data = MakeStepData(recsys);
  const auto& [x, ids, labels, clicks] = data;
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

template <typename T>
engine::HostTensor Host(const char* name, DType dtype, std::vector<std::int64_t> shape,
                        const std::vector<T>& values) {
  engine::HostTensor t{name, dtype, std::move(shape), {}};
  const auto* p = reinterpret_cast<const std::uint8_t*>(values.data());
  t.bytes.assign(p, p + values.size() * sizeof(T));
  return t;
}

void BM_SessionStep(benchmark::State& state, const std::string& model) {
  const char* env = std::getenv("NDSERVE_BENCH_DEVICE");
  const absl::StatusOr<Device> device = ParseDevice(env != nullptr ? env : "cpu");
  if (!device.ok()) {
    state.SkipWithError(std::string(device.status().message()).c_str());
    return;
  }
  MemorySystem memory;
  auto model_scope = Check(memory.NewBaseManager(*device, ManagerLevel::kModel, "model"));
  auto trainer = Check(engine::TrainerScope::Open(model_scope, "bench"));
  const bool recsys = model == "recsys";
  TrainingRunOptions options;
  options.loss = recsys ? LossKind::kBceWithLogits : LossKind::kCrossEntropy;
  options.target_output = "fc2";
  options.optimizer = OptimizerKind::kSgd;
  options.lr = 0.01f;
  absl::StatusOr<std::unique_ptr<TrainingRun>> run =
      TrainingRun::Create(ModelPath(model), trainer, options);
  if (!run.ok()) {
    state.SkipWithError(std::string(run.status().message()).c_str());
    return;
  }
  const StepData data = MakeStepData(recsys);
  const auto& [x, ids, labels, clicks] = data;
  std::vector<engine::HostTensor> inputs;
  engine::HostTensor target;
  if (recsys) {
    inputs.push_back(Host("sparse_ids", DType::kInt64, {kBatch, 4, 8}, ids));
    inputs.push_back(Host("dense", DType::kFp32, {kBatch, 13}, x));
    target = Host("labels", DType::kFp32, {kBatch, 1}, clicks);
  } else {
    inputs.push_back(Host("input", DType::kFp32, {kBatch, 64}, x));
    target = Host("labels", DType::kInt64, {kBatch}, labels);
  }
  for (auto _ : state) {
    const absl::StatusOr<StepResult> step = (*run)->Step(inputs, target);
    if (!step.ok()) {
      state.SkipWithError(std::string(step.status().message()).c_str());
      return;
    }
  }
  state.counters["steps/s"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
  state.SetLabel(device->ToString());
}

BENCHMARK_CAPTURE(BM_TrainStep, mlp, std::string("mlp"))->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_TrainStep, recsys, std::string("recsys"))->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_SessionStep, mlp, std::string("mlp"))->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_SessionStep, recsys, std::string("recsys"))->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace ndserve::train

BENCHMARK_MAIN();
