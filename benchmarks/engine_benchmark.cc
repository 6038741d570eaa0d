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
// NDSERVE_BENCH_DEVICE=cuda:0 runs the rows on a GPU, the kernels-only baseline as the
// floor of a plain run (pinned copies in and out, kernels, one synchronization, nothing
// allocated per run); NDSERVE_BENCH_CUDA_GRAPHS=0 runs the engine rows without CUDA
// graph capture, the baseline of the replayed runs, and NDSERVE_BENCH_CUBLASLT=0 without
// cuBLASLt's fused bias and Relu, the baseline of that fusion (docs/design.md §4.3).

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "benchmark/benchmark.h"
#include "engine/repository.h"
#include "engine/served_model.h"
#include "kernels/dispatch.h"
#include "kernels/gpu_resources.h"
#include "kernels/shape_inference.h"
#include "memory/cuda_allocator.h"
#include "memory/cuda_host_allocator.h"
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

// NDSERVE_BENCH_CUBLASLT=0: bias and Relu as kernels of their own after each cuBLAS
// product (engine and kernels-only rows), the baseline of the cuBLASLt epilogue.
bool BenchCublasLt() {
  const char* lt = std::getenv("NDSERVE_BENCH_CUBLASLT");
  return lt == nullptr || std::string(lt) != "0";
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
  spec.config->cublaslt = BenchCublasLt();
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

// Scratch for the baseline's CUDA kernels: one device buffer, handed out from the front
// and rewound before every run (the run synchronizes at its end, so nothing in flight
// still reads it).
class BumpScratch : public kernels::ScratchAllocator {
 public:
  BumpScratch(void* base, std::size_t bytes) : base_(static_cast<char*>(base)), bytes_(bytes) {}
  absl::StatusOr<void*> Allocate(std::size_t bytes) override {
    const std::size_t at = (used_ + 255) / 256 * 256;
    if (at + bytes > bytes_) return absl::ResourceExhaustedError("benchmark scratch");
    used_ = at + bytes;
    return base_ + at;
  }
  void Rewind() { used_ = 0; }

 private:
  char* base_;
  std::size_t bytes_, used_ = 0;
};

// Blocks of device or pinned memory for one benchmark, each given back to its allocator
// when this goes out of scope (so after the work that used them has finished).
class OwnedBlocks {
 public:
  OwnedBlocks() = default;
  OwnedBlocks(const OwnedBlocks&) = delete;
  OwnedBlocks& operator=(const OwnedBlocks&) = delete;
  ~OwnedBlocks() {
    for (const Block& b : blocks_) b.allocator->Deallocate(b.ptr, b.bytes);
  }
  // At least 256 bytes, so an empty tensor still has an address of its own.
  absl::StatusOr<void*> Allocate(DeviceAllocator* allocator, std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 256);
    NDS_ASSIGN_OR_RETURN(void* p, allocator->Allocate(bytes));
    blocks_.push_back({allocator, p, bytes});
    return p;
  }

 private:
  struct Block {
    DeviceAllocator* allocator;
    void* ptr;
    std::size_t bytes;
  };
  std::vector<Block> blocks_;
};

// The baseline: the graph's kernels over buffers made once. On a GPU it is the floor of a
// plain (uncaptured) predictor run: one H2D copy per input from pinned memory, the
// kernels, one D2H copy per output into pinned memory and one synchronization, on
// device buffers, a cuBLAS workspace and scratch allocated up front.
void BM_Kernels(benchmark::State& state, const std::string& name) {
  ServedModel* served = Model(name);
  if (served == nullptr) return state.SkipWithError("model did not load");
  const Device device = served->device();
  const int64_t batch = state.range(0);
  Inputs inputs(*served, batch);
  const Graph& graph = served->model().graph();

  // Declared in this order so they go in reverse: the GPU resources first (their
  // destructor waits for the stream), then the blocks, then their allocators.
  std::unique_ptr<DeviceAllocator> device_memory, pinned_memory;
  OwnedBlocks owned;
  std::unique_ptr<kernels::GpuResources> gpu;
  auto allocate = [&](DeviceAllocator* allocator, std::size_t bytes) {
    return owned.Allocate(allocator, bytes);
  };
  std::unique_ptr<BumpScratch> scratch;
  if (device.is_cuda()) {
    absl::Status made = [&]() -> absl::Status {
      NDS_ASSIGN_OR_RETURN(
          gpu, kernels::GpuResources::Create(device, static_cast<int>(graph.nodes().size())));
      NDS_ASSIGN_OR_RETURN(device_memory, CudaAllocator::Create(device.ordinal));
      NDS_ASSIGN_OR_RETURN(pinned_memory, CudaHostAllocator::Create(device.ordinal));
      constexpr std::size_t kWorkspace = std::size_t{4} << 20, kScratch = std::size_t{64} << 20;
      NDS_ASSIGN_OR_RETURN(void* workspace, allocate(device_memory.get(), kWorkspace));
      NDS_RETURN_IF_ERROR(gpu->SetCublasWorkspace(workspace, kWorkspace));
      gpu->SetCublasLt(BenchCublasLt());
      NDS_ASSIGN_OR_RETURN(void* scratch_base, allocate(device_memory.get(), kScratch));
      scratch = std::make_unique<BumpScratch>(scratch_base, kScratch);
      return absl::OkStatus();
    }();
    if (!made.ok()) return state.SkipWithError(std::string(made.message()).c_str());
  }

  struct Slot {
    std::shared_ptr<std::vector<uint8_t>> storage;
    void* data = nullptr;
    kernels::TensorDesc desc;
    Device device;  // where `data` lives: the kernels check it
  };
  struct Copy {
    void* device;
    void* host;  // pinned
    std::size_t bytes;
  };
  std::vector<Copy> uploads, downloads;
  std::vector<Slot> slots(graph.values().size());
  absl::Status laid_out = [&]() -> absl::Status {
    for (int v = 0; v < static_cast<int>(graph.values().size()); ++v) {
      const Value& value = graph.values()[v];
      if (value.source == ValueSource::kInitializer) {
        const NDArray& a = served->model().initializer(value.index);
        NDS_ASSIGN_OR_RETURN(slots[v].data, a.Data());
        slots[v].desc = {a.dtype(), kernels::Shape(a.shape().begin(), a.shape().end())};
        slots[v].device = a.device();
      } else if (value.source == ValueSource::kInput) {
        const InferInputTensor& in = inputs.request.inputs[value.index];
        slots[v].desc = {in.dtype, kernels::Shape(in.shape.begin(), in.shape.end())};
        slots[v].data = const_cast<uint8_t*>(in.data.data());
        if (gpu != nullptr) {
          NDS_ASSIGN_OR_RETURN(void* host, allocate(pinned_memory.get(), in.data.size()));
          std::memcpy(host, in.data.data(), in.data.size());
          NDS_ASSIGN_OR_RETURN(slots[v].data, allocate(device_memory.get(), in.data.size()));
          slots[v].device = device;
          uploads.push_back({slots[v].data, host, in.data.size()});
        }
      }
    }
    return absl::OkStatus();
  }();
  struct Step {
    kernels::KernelFn fn;
    std::vector<kernels::TensorView> inputs, outputs;
    const Node* node;
    int index;
  };
  std::vector<Step> steps;
  for (int n = 0; laid_out.ok() && n < static_cast<int>(graph.nodes().size()); ++n) {
    const Node& node = graph.nodes()[n];
    std::vector<kernels::TensorDesc> descs;
    for (int in : node.inputs) descs.push_back(slots[in].desc);
    std::vector<kernels::TensorDesc> out = *kernels::InferOutputs(node.op, descs, node.attrs);
    if (IsShapeOnlyOp(node.op)) {
      slots[node.outputs[0]] = slots[node.inputs[0]];
      slots[node.outputs[0]].desc = out[0];
      continue;
    }
    absl::StatusOr<kernels::KernelFn> fn = kernels::Lookup(node.op, device);
    if (!fn.ok()) {
      laid_out = fn.status();
      break;
    }
    Step step{*fn, {}, {}, &node, n};
    for (int in : node.inputs) {
      step.inputs.push_back(
          {slots[in].data, slots[in].desc.dtype, slots[in].desc.shape, slots[in].device});
    }
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      const std::size_t bytes = kernels::NumElements(out[j].shape) * DTypeSize(out[j].dtype);
      Slot s{nullptr, nullptr, out[j], gpu != nullptr ? device : Device{}};
      if (gpu != nullptr) {
        absl::StatusOr<void*> p = allocate(device_memory.get(), bytes);
        if (!p.ok()) {
          laid_out = p.status();
          break;
        }
        s.data = *p;
      } else {
        s.storage = std::make_shared<std::vector<uint8_t>>(bytes + 1);
        s.data = s.storage->data();
      }
      if (node.outputs[j] != kNoValue) slots[node.outputs[j]] = s;
      step.outputs.push_back({s.data, s.desc.dtype, s.desc.shape, s.device});
      if (node.outputs[j] == kNoValue) slots.push_back(s);  // keep it alive
    }
    steps.push_back(std::move(step));
  }
  for (int v : graph.output_values()) {
    if (gpu == nullptr || !laid_out.ok()) break;
    const std::size_t bytes =
        kernels::NumElements(slots[v].desc.shape) * DTypeSize(slots[v].desc.dtype);
    absl::StatusOr<void*> host = allocate(pinned_memory.get(), bytes);
    if (!host.ok()) {
      laid_out = host.status();
      break;
    }
    downloads.push_back({slots[v].data, *host, bytes});
  }
  if (!laid_out.ok()) return state.SkipWithError(std::string(laid_out.message()).c_str());

  kernels::KernelContext ctx = gpu != nullptr ? gpu->context() : kernels::KernelContext::Cpu();
  if (gpu != nullptr) {
    ctx.defer_error_check = true;
    ctx.scratch = scratch.get();
  }
  auto run = [&]() -> absl::Status {
    if (gpu != nullptr) {
      scratch->Rewind();
      gpu->ClearErrorFlags();
      for (const Copy& c : uploads) {
        NDS_RETURN_IF_ERROR(gpu->CopyToDevice(c.device, c.host, c.bytes));
      }
    }
    for (const Step& step : steps) {
      kernels::KernelContext node_ctx = ctx;
      if (gpu != nullptr) node_ctx.error_flag = gpu->error_flag(step.index);
      NDS_RETURN_IF_ERROR(step.fn(node_ctx, step.inputs, step.outputs, step.node->attrs));
    }
    if (gpu != nullptr) {
      for (const Copy& c : downloads) {
        NDS_RETURN_IF_ERROR(gpu->CopyToHost(c.host, c.device, c.bytes));
      }
      NDS_RETURN_IF_ERROR(gpu->Synchronize());
      if (gpu->FirstRaisedErrorFlag() >= 0) return absl::InternalError("a kernel raised its flag");
    }
    return absl::OkStatus();
  };
  for (auto _ : state) {
    if (absl::Status s = run(); !s.ok()) {
      return state.SkipWithError(std::string(s.message()).c_str());
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
