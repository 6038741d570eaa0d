// What a request's scope costs: open a context under a capped predictor,
// create 8 arrays of mixed sizes, close it; against the same 8 allocations done
// directly on the same pool, in the same run. Target: manager <= 2x raw pool.
//   RawPool/Request8         8 Pool::Allocate + 8 Pool::Free
//   Manager/Request8         NewSubManager + 8 Create (handles held) + Close
//   Manager/Request8Dropped  as above, each handle dropped right after Create
//   .../threads:2            the same loop from two threads (one predictor, one pool)
// The ratio of each Manager row to the matching RawPool row is printed at the end.
// Set NDSERVE_BENCH_DEVICE=cuda:0 to run on a GPU's pool.
//
// The single-thread rows run first: the spin locks and reference counts skip their
// locked instructions while the process has one thread (glibc's __libc_single_threaded),
// and a threaded row ends that for good.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"

namespace ndserve {
namespace {

struct ArraySpec {
  std::array<std::int64_t, 2> shape;
  int rank;
  DType dtype;
};

// Mixed sizes as one small model request has them: ids, masks, activations, a scalar.
constexpr std::array<ArraySpec, 8> kRequest = {{
    {{1, 128}, 2, DType::kInt64},   // 1 KiB   input ids
    {{1, 128}, 2, DType::kBool},    // 128 B   attention mask
    {{128, 256}, 2, DType::kFp32},  // 128 KiB hidden states
    {{128, 64}, 2, DType::kFp32},   // 32 KiB  projection
    {{1, 1}, 2, DType::kFp32},      // 4 B     a scalar
    {{64, 64}, 2, DType::kFp16},    // 8 KiB
    {{1000, 1}, 2, DType::kFp32},   // ~4 KiB  logits
    {{3, 300}, 2, DType::kInt32},   // 3.5 KiB odd size
}};

std::size_t BytesOf(const ArraySpec& spec) {
  std::size_t n = DTypeSize(spec.dtype);
  for (int i = 0; i < spec.rank; ++i) n *= static_cast<std::size_t>(spec.shape[i]);
  return n;
}

Device BenchDevice() {
  const char* env = std::getenv("NDSERVE_BENCH_DEVICE");
  if (env == nullptr) return Device::Cpu();
  absl::StatusOr<Device> device = ParseDevice(env);
  return device.ok() ? *device : Device::Cpu();
}

// The benchmark's own memory system (default config), never destroyed: the predictor
// below lives for the whole run.
MemorySystem& BenchMemory() {
  static MemorySystem* memory = new MemorySystem();
  return *memory;
}

Pool& BenchPool() {
  absl::StatusOr<Pool*> pool = BenchMemory().GetPool(BenchDevice());
  if (!pool.ok()) {
    std::fprintf(stderr, "no pool: %s\n", std::string(pool.status().message()).c_str());
    std::abort();
  }
  return **pool;
}

// One capped predictor shared by every row and thread, as in the daemon.
NDManager& Predictor() {
  static NDManager* predictor = [] {
    absl::StatusOr<std::shared_ptr<NDManager>> p =
        BenchMemory().NewBaseManager(BenchDevice(), ManagerLevel::kPredictor, "bench-predictor");
    if (!p.ok()) std::abort();
    (*p)->Cap();
    return p->get();  // the system manager keeps it alive
  }();
  return *predictor;
}

void Warm() {
  // Both rows start from a pool that caches every size, so neither pays device calls.
  Pool& pool = BenchPool();
  std::array<Block, kRequest.size()> blocks;
  for (int round = 0; round < 4; ++round) {
    for (std::size_t i = 0; i < kRequest.size(); ++i)
      blocks[i] = *pool.Allocate(BytesOf(kRequest[i]));
    for (const Block& b : blocks) pool.Free(b);
  }
  Predictor();
}

void BM_RawPool_Request8(benchmark::State& state) {
  Warm();
  Pool& pool = BenchPool();
  std::array<std::size_t, kRequest.size()> sizes;
  for (std::size_t i = 0; i < kRequest.size(); ++i) sizes[i] = BytesOf(kRequest[i]);
  std::array<Block, kRequest.size()> blocks;
  for (auto _ : state) {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      absl::StatusOr<Block> block = pool.Allocate(sizes[i]);
      if (!block.ok()) state.SkipWithError("allocation failed");
      blocks[i] = *block;
    }
    benchmark::DoNotOptimize(blocks.data());
    for (const Block& block : blocks) pool.Free(block);
  }
  state.SetItemsProcessed(state.iterations());
}

template <bool kHoldHandles>
void ManagerRequest(benchmark::State& state) {
  Warm();
  NDManager& predictor = Predictor();
  for (auto _ : state) {
    absl::StatusOr<std::shared_ptr<NDManager>> ctx =
        predictor.NewSubManager(ManagerLevel::kContext);
    if (!ctx.ok()) state.SkipWithError("open failed");
    std::array<NDArray, kRequest.size()> arrays;
    for (std::size_t i = 0; i < kRequest.size(); ++i) {
      const ArraySpec& spec = kRequest[i];
      absl::StatusOr<NDArray> array =
          (*ctx)->Create(absl::MakeConstSpan(spec.shape.data(), spec.rank), spec.dtype);
      if (!array.ok()) state.SkipWithError("create failed");
      if (kHoldHandles) {
        arrays[i] = *std::move(array);
      } else {
        benchmark::DoNotOptimize(*array);
      }
    }
    benchmark::DoNotOptimize(arrays.data());
    (*ctx)->Close().IgnoreError();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Manager_Request8(benchmark::State& state) { ManagerRequest<true>(state); }
void BM_Manager_Request8Dropped(benchmark::State& state) { ManagerRequest<false>(state); }

// Single-threaded rows first (see the header comment).
BENCHMARK(BM_RawPool_Request8);
BENCHMARK(BM_Manager_Request8);
BENCHMARK(BM_Manager_Request8Dropped);
BENCHMARK(BM_RawPool_Request8)->Threads(2)->UseRealTime();
BENCHMARK(BM_Manager_Request8)->Threads(2)->UseRealTime();

// Prints each row as usual, then the Manager/RawPool ratios per thread count.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.iterations == 0) continue;
      // ns per request: CPU time for one thread (this machine is shared, and preemption
      // shows up in wall time), wall time per request for the threaded rows; the best
      // of the repetitions.
      const double ns = run.threads == 1 ? run.GetAdjustedCPUTime() : run.GetAdjustedRealTime();
      auto [it, inserted] = times_.emplace(run.benchmark_name(), ns);
      if (!inserted) it->second = std::min(it->second, ns);
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    for (const auto& [name, ns] : times_) {
      if (name.rfind("BM_Manager_", 0) != 0) continue;
      std::string suffix = name.substr(name.find("Request8") + 8);
      if (suffix.rfind("Dropped", 0) == 0) suffix = suffix.substr(7);
      auto raw = times_.find("BM_RawPool_Request8" + suffix);
      if (raw == times_.end() || raw->second <= 0) continue;
      std::printf("%-42s %8.1f ns/request vs raw pool %8.1f ns: %.2fx\n", name.c_str(), ns,
                  raw->second, ns / raw->second);
    }
  }

 private:
  std::map<std::string, double> times_;
};

}  // namespace
}  // namespace ndserve

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ndserve::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
