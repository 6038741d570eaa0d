// Engine throughput on the CPU: rows/s of the example models mlp and recsys at batch 1,
// 16 and 256.
//
//   engine/<model>/<batch>   ServedModel::Infer: request validation, the predictor
//                            pool, a PredictorContext per request (inputs uploaded into
//                            pool blocks, every intermediate created and freed in it),
//                            kernels, outputs copied out, context closed.
//   kernels/<model>/<batch>  Baseline, same run: the same graph's kernels on buffers
//                            allocated once up front; no managers, pool, validation or
//                            copies. engine / kernels is what the memory discipline costs.
//
//   engine/<model>/1/threads:4  four threads calling Infer at once: how the predictor
//                            instances (config count, or NDSERVE_BENCH_INSTANCES) scale.
//
// recsys/1/model.onnx is generated at build time (tools/gen_models.py). The configs
// allow batch 64; the benchmark loads both models with max_batch_size 256.
// NDSERVE_BENCH_DEVICE=cuda:0 runs the engine rows on a GPU (the kernels-only baseline
// stays a CPU measurement and is skipped there); NDSERVE_BENCH_CUDA_GRAPHS=0 runs them
// without CUDA graph capture, the baseline of the replayed runs (docs/design.md §4.3).

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/logging.h"
#include "benchmark/benchmark.h"
#include "engine/repository.h"
#include "engine/served_model.h"
#include "kernels/dispatch.h"
#include "kernels/shape_inference.h"
#include "memory/memory_system.h"

namespace ndserve::engine {
namespace {

namespace fs = std::filesystem;

fs::path SourceDir() {
  if (const char* env = std::getenv("NDSERVE_SOURCE_DIR")) return env;
  return fs::path(__FILE__).parent_path().parent_path();
}

Device BenchDevice() {
  const char* env = std::getenv("NDSERVE_BENCH_DEVICE");
  if (env == nullptr) return Device::Cpu();
  absl::StatusOr<Device> device = ParseDevice(env);
  return device.ok() ? *device : Device::Cpu();
}

// The benchmark's own memory system (default config), never destroyed: the models stay
// loaded for the whole run.
MemorySystem* BenchMemory() {
  static MemorySystem* memory = new MemorySystem();
  return memory;
}

std::shared_ptr<ServedModel> LoadModel(const std::string& name) {
  ModelRepository repo((SourceDir() / "examples/models").string());
  absl::StatusOr<RepositoryModel> m = repo.ReadModel(name);
  if (!m.ok()) {
    LOG(ERROR) << m.status();
    return nullptr;
  }
  ModelLoadSpec spec;
  spec.name = name;
  spec.model_path = ModelRepository::ResolveVersion(*m, 0)->model_path;
  spec.config = m->config;
  spec.config->max_batch_size = 256;
  spec.device = BenchDevice();
  if (const char* n = std::getenv("NDSERVE_BENCH_INSTANCES")) spec.instance_count = std::atoi(n);
  // NDSERVE_BENCH_CUDA_GRAPHS=0: the plain GPU run, the baseline of the graph replay.
  if (const char* g = std::getenv("NDSERVE_BENCH_CUDA_GRAPHS")) {
    spec.config->cuda_graphs = std::string(g) != "0";
  }
  absl::StatusOr<std::shared_ptr<ServedModel>> served = ServedModel::Load(spec, BenchMemory());
  if (!served.ok()) {
    LOG(ERROR) << served.status();
    return nullptr;
  }
  return *served;
}

// Random inputs of `batch` rows for every input of `model`: INT64 inputs are ids in
// [0, 1000) (valid rows of any recsys table), floats in [-1, 1).
struct Inputs {
  Inputs(const ServedModel& model, int64_t batch) {
    std::mt19937_64 rng(42);
    request.model_name = model.name();
    for (const TensorSpec& spec : model.signature().inputs) {
      std::vector<int64_t> shape = spec.dims;
      shape[0] = batch;
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<uint8_t>& bytes = buffers.emplace_back(n * DTypeSize(spec.dtype));
      for (int64_t i = 0; i < n; ++i) {
        if (spec.dtype == DType::kInt64) {
          reinterpret_cast<int64_t*>(bytes.data())[i] = static_cast<int64_t>(rng() % 1000);
        } else {
          reinterpret_cast<float*>(bytes.data())[i] =
              static_cast<float>(rng() % 2000) / 1000.0f - 1.0f;
        }
      }
      request.inputs.push_back({spec.name, spec.dtype, shape, absl::MakeConstSpan(bytes)});
    }
  }
  std::vector<std::vector<uint8_t>> buffers;
  InferenceRequest request;
};

ServedModel* Model(const std::string& name) {
  static absl::Mutex mu;  // the threaded rows look their model up at once
  absl::MutexLock lock(&mu);
  static auto* models = new std::map<std::string, std::shared_ptr<ServedModel>>();
  auto it = models->find(name);
  if (it == models->end()) it = models->emplace(name, LoadModel(name)).first;
  return it->second.get();
}

void SetRate(benchmark::State& state, int64_t batch) {
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(state.iterations() * batch),
                                                benchmark::Counter::kIsRate);
}

void BM_Engine(benchmark::State& state, const std::string& name) {
  ServedModel* model = Model(name);
  if (model == nullptr) return state.SkipWithError("model did not load");
  const int64_t batch = state.range(0);
  Inputs inputs(*model, batch);
  for (auto _ : state) {
    absl::StatusOr<InferenceResponse> r = model->Infer(inputs.request);
    if (!r.ok()) return state.SkipWithError(std::string(r.status().message()).c_str());
    benchmark::DoNotOptimize(r->outputs[0].data.data());
  }
  SetRate(state, batch);
}

// The baseline: the graph's kernels over host buffers made once.
void BM_Kernels(benchmark::State& state, const std::string& name) {
  ServedModel* served = Model(name);
  if (served == nullptr) return state.SkipWithError("model did not load");
  if (served->device().is_cuda()) return state.SkipWithError("the kernels-only baseline is CPU");
  const int64_t batch = state.range(0);
  Inputs inputs(*served, batch);
  const Graph& graph = served->model().graph();
  struct Slot {
    std::shared_ptr<std::vector<uint8_t>> storage;
    void* data = nullptr;
    kernels::TensorDesc desc;
  };
  std::vector<Slot> slots(graph.values().size());
  for (int v = 0; v < static_cast<int>(graph.values().size()); ++v) {
    const Value& value = graph.values()[v];
    if (value.source == ValueSource::kInitializer) {
      const NDArray& a = served->model().initializer(value.index);
      slots[v].data = *a.Data();
      slots[v].desc = {a.dtype(), kernels::Shape(a.shape().begin(), a.shape().end())};
    } else if (value.source == ValueSource::kInput) {
      const InferInputTensor& in = inputs.request.inputs[value.index];
      slots[v].data = const_cast<uint8_t*>(in.data.data());
      slots[v].desc = {in.dtype, kernels::Shape(in.shape.begin(), in.shape.end())};
    }
  }
  struct Step {
    kernels::KernelFn fn;
    std::vector<kernels::TensorView> inputs, outputs;
    const Node* node;
  };
  std::vector<Step> steps;
  for (const Node& node : graph.nodes()) {
    std::vector<kernels::TensorDesc> descs;
    for (int in : node.inputs) descs.push_back(slots[in].desc);
    std::vector<kernels::TensorDesc> out = *kernels::InferOutputs(node.op, descs, node.attrs);
    if (IsShapeOnlyOp(node.op)) {
      slots[node.outputs[0]] = slots[node.inputs[0]];
      slots[node.outputs[0]].desc = out[0];
      continue;
    }
    Step step{*kernels::Lookup(node.op, Device::Cpu()), {}, {}, &node};
    for (int in : node.inputs) {
      step.inputs.push_back({slots[in].data, slots[in].desc.dtype, slots[in].desc.shape, {}});
    }
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      auto storage = std::make_shared<std::vector<uint8_t>>(
          kernels::NumElements(out[j].shape) * DTypeSize(out[j].dtype) + 1);
      Slot s{storage, storage->data(), out[j]};
      if (node.outputs[j] != kNoValue) slots[node.outputs[j]] = s;
      step.outputs.push_back({s.data, s.desc.dtype, s.desc.shape, {}});
      if (node.outputs[j] == kNoValue) slots.push_back(s);  // keep it alive
    }
    steps.push_back(std::move(step));
  }
  const kernels::KernelContext ctx = kernels::KernelContext::Cpu();
  for (auto _ : state) {
    for (const Step& step : steps) {
      absl::Status s = step.fn(ctx, step.inputs, step.outputs, step.node->attrs);
      if (!s.ok()) return state.SkipWithError(std::string(s.message()).c_str());
    }
    benchmark::ClobberMemory();
  }
  SetRate(state, batch);
}

}  // namespace
}  // namespace ndserve::engine

int main(int argc, char** argv) {
  ndserve::logging::SetMinSeverity(ndserve::logging::Severity::kWarning);
  for (const char* model : {"mlp", "recsys"}) {
    for (int64_t batch : {1, 16, 256}) {
      benchmark::RegisterBenchmark(absl::StrCat("engine/", model).c_str(),
                                   ndserve::engine::BM_Engine, std::string(model))
          ->Arg(batch)
          ->UseRealTime();
      if (batch == 1) {
        benchmark::RegisterBenchmark(absl::StrCat("engine/", model).c_str(),
                                     ndserve::engine::BM_Engine, std::string(model))
            ->Arg(batch)
            ->Threads(4)
            ->UseRealTime();
      }
      benchmark::RegisterBenchmark(absl::StrCat("kernels/", model).c_str(),
                                   ndserve::engine::BM_Kernels, std::string(model))
          ->Arg(batch)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
