// GEMM through the kernel dispatch table (OpenBLAS on the CPU, cuBLAS on a GPU when one is
// present), reported next to its baseline in the same run: a naive triple loop on the
// CPU. Shapes: square matrices and the example MLP's layers at batch 64.
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/dispatch.h"
#include "kernels/gpu_resources.h"
#include "memory/cuda_allocator.h"
#include "memory/cuda_runtime.h"

namespace ndserve::kernels {
namespace {

std::vector<float> Filled(int64_t n, float v) { return std::vector<float>(n, v); }

void SetCounters(benchmark::State& state, int64_t m, int64_t n, int64_t k) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// Baseline: the loop a kernel without BLAS would run (i-k-j order, vectorizable).
void BM_NaiveGemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::vector<float> a = Filled(m * k, 0.5f), b = Filled(k * n, 0.25f), y(m * n);
  for (auto _ : state) {
    std::fill(y.begin(), y.end(), 0.0f);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = 0; p < k; ++p) {
        const float av = a[i * k + p];
        for (int64_t j = 0; j < n; ++j) y[i * n + j] += av * b[p * n + j];
      }
    }
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, m, n, k);
}

void BM_DispatchGemm(benchmark::State& state, Device device) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  if (device.is_cuda() && CudaDeviceCount() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  auto alloc = MakeDeviceAllocator(device);
  std::unique_ptr<GpuResources> gpu;
  KernelContext ctx = KernelContext::Cpu();
  if (device.is_cuda()) {
    auto r = GpuResources::Create(device);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    gpu = *std::move(r);
    ctx = gpu->context();
  }
  // Inputs stay uninitialized on the device: timing does not depend on the values.
  const std::size_t bytes[3] = {static_cast<std::size_t>(m * k * 4),
                                static_cast<std::size_t>(k * n * 4),
                                static_cast<std::size_t>(m * n * 4)};
  void* ptr[3];
  for (int i = 0; i < 3; ++i) ptr[i] = *(*alloc)->Allocate(bytes[i]);
  const TensorView a{ptr[0], DType::kFp32, {m, k}, device};
  const TensorView b{ptr[1], DType::kFp32, {k, n}, device};
  const TensorView y{ptr[2], DType::kFp32, {m, n}, device};
  const KernelFn fn = *Lookup(OpKind::kGemm, device);
  const TensorView in[] = {a, b};
  for (auto _ : state) {
    const absl::Status s =
        fn(ctx, absl::MakeConstSpan(in), absl::MakeConstSpan(&y, 1), GemmAttrs{});
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    if (gpu) (void)gpu->Synchronize();
  }
  SetCounters(state, m, n, k);
  for (int i = 0; i < 3; ++i) (*alloc)->Deallocate(ptr[i], bytes[i]);
}

// Real time: OpenBLAS runs its own threads, whose work the calling thread's CPU time misses.
void Shapes(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  for (int s : {64, 256, 512}) b->Args({s, s, s});
  b->Args({64, 128, 64})->Args({64, 64, 128})->Args({64, 10, 64});  // mlp layers, batch 64
}

BENCHMARK(BM_NaiveGemm)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_DispatchGemm, cpu, Device::Cpu())->Apply(Shapes);
BENCHMARK_CAPTURE(BM_DispatchGemm, cuda, Device::Cuda(0))->Apply(Shapes);

}  // namespace
}  // namespace ndserve::kernels

BENCHMARK_MAIN();
