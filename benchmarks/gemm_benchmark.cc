// GEMM through the kernel dispatch table (OpenBLAS on the CPU, cuBLAS on a GPU when one is
// present), reported next to its baseline in the same run: a naive triple loop on the
// CPU. Shapes: square matrices and the example MLP's layers at batch 64.
// The packed GEMM (kernels/cpu/packed_gemm.h) at resnet18's conv shapes, W packed as A
// and the col matrix streamed as B as Conv calls it, next to the machine's FMA peak
// measured in the same run (a register-only loop of independent FMAs per thread), so
// its GFLOP/s read as a share of what the cores can do. Beside it the direct conv
// (kernels/cpu/direct_conv.h) at the same convs, whole: padding copy, products, and the
// copy into Y with bias and Relu; the packed GEMM's rows leave out im2col and the
// epilogue, so they are a lower bound on the im2col path's time.
#include <memory>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/conv_geometry.h"
#include "kernels/cpu/direct_conv.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/winograd_conv.h"
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

// 12 independent 8-wide accumulators (as many as the packed micro-kernel keeps) and
// nothing but FMAs, `iters` times: the core's FMA peak.
NDS_CPU_CLONES
void FmaLoop(int64_t iters, float* out) {
  typedef float V8 __attribute__((vector_size(32)));
  V8 x = {1e-3f, 1e-3f, 1e-3f, 1e-3f, 1e-3f, 1e-3f, 1e-3f, 1e-3f}, y = x + 0.5f;
  benchmark::DoNotOptimize(x);
  benchmark::DoNotOptimize(y);
  // Distinct starting values: equal chains would be merged into one by the compiler.
  V8 a0 = x, a1 = x + 1, a2 = x + 2, a3 = x + 3, a4 = x + 4, a5 = x + 5, a6 = x + 6, a7 = x + 7;
  V8 a8 = x + 8, a9 = x + 9, a10 = x + 10, a11 = x + 11;
  for (int64_t i = 0; i < iters; ++i) {  // each line one FMA, each chain independent
    a0 = a0 * y + x, a1 = a1 * y + x, a2 = a2 * y + x, a3 = a3 * y + x;
    a4 = a4 * y + x, a5 = a5 * y + x, a6 = a6 * y + x, a7 = a7 * y + x;
    a8 = a8 * y + x, a9 = a9 * y + x, a10 = a10 * y + x, a11 = a11 * y + x;
  }
  const V8 sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
  *out = sum[0];
}

// The FMA peak of IntraOpThreads() threads, each running FmaLoop.
void BM_FmaPeak(benchmark::State& state) {
  constexpr int64_t kIters = 1 << 16;
  const int threads = cpu::IntraOpThreads();
  std::vector<float> out(threads);
  for (auto _ : state) {
    cpu::ParallelFor(threads, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) FmaLoop(kIters, &out[t]);
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 8 * 12 * kIters * threads,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

// Conv's call: W [M x K] packed at load, col [K x N] streamed, the bias and a Clip(0, 6)
// applied by the micro-kernel (PackedRowOutput), as mobilenet_v2's convs have them.
void BM_PackedConvGemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::vector<float> w = Filled(m * k, 0.5f), col = Filled(k * n, 0.25f), y(m * n);
  const std::vector<float> bias = Filled(m, 0.125f);
  const cpu::PackedMatrix packed = cpu::PackedMatrix::Pack(
      cpu::PackedMatrix::Side::kA, cpu::MatrixRef{w.data(), k, false}, m, k);
  std::vector<float> scratch(cpu::PackedGemmScratchFloats(packed, m, n, k));
  cpu::PackedRowOutput out;
  out.bias = bias.data();
  out.act = {ConvActivation::kClip, 0.0f, 6.0f};
  for (auto _ : state) {
    cpu::PackedGemm(packed, cpu::MatrixRef{col.data(), n, false}, m, n, k, y.data(), n, false,
                    scratch.data(), out, [](int64_t, int64_t, int64_t, int64_t) {});
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, m, n, k);
}

// resnet18's 3x3 convs at batch 1 (M, P, K = C*9) and its 7x7 stem.
void ConvShapes(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  b->Args({64, 3136, 576})->Args({128, 784, 1152})->Args({256, 196, 2304});
  b->Args({512, 49, 4608})->Args({64, 12544, 147});
  // The stride-2 3x3 convs that open layers 2-4.
  b->Args({128, 784, 576})->Args({256, 196, 1152})->Args({512, 49, 2304});
}

// Pointwise convs of mobilenet_v2 at batch 1 (M, P, K), from each spatial size.
void PointwiseShapes(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  b->Args({96, 12544, 16})->Args({24, 3136, 144})->Args({192, 784, 32});
  b->Args({64, 196, 384})->Args({160, 49, 960});
  // The other 7x7-plane ones (N = 49: the last 16-wide column panel holds one column).
  b->Args({1280, 49, 320})->Args({320, 49, 960})->Args({960, 49, 160});
}

// The direct conv of one image of C x H x H into M channels, a k x k kernel with stride s
// and padding k / 2, as resnet18 has them; bias and a fused Relu.
void BM_DirectConv(benchmark::State& state) {
  const int64_t c = state.range(0), h = state.range(1), m = state.range(2);
  const int64_t k = state.range(3), stride = state.range(4);
  ConvAttrs a;
  a.strides = {stride, stride};
  a.pads = {k / 2, k / 2, k / 2, k / 2};
  a.activation.kind = ConvActivation::kRelu;
  const int64_t xs[] = {h, h}, ks[] = {k, k};
  const ConvGeometry g = *MakeConvGeometry("Conv", a, xs, ks, false);
  const int64_t kk = c * k * k;
  std::vector<float> w = Filled(m * kk, 0.01f), x = Filled(c * h * h, 0.25f), bias(m, 0.5f);
  std::vector<float> y(m * g.out_plane());
  const cpu::PackedMatrix packed = cpu::PackedMatrix::Pack(
      cpu::PackedMatrix::Side::kA, cpu::MatrixRef{w.data(), kk, false}, m, kk);
  std::vector<float> scratch(cpu::DirectConvScratchFloats(g, 1, c, m));
  for (auto _ : state) {
    cpu::DirectConv(g, packed, 1, c, m, x.data(), bias.data(), a.activation, scratch.data(),
                    y.data());
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, m, g.out_plane(), kk);
}

// resnet18's convs in ConvShapes' order: C, H, M, k, stride.
void DirectConvShapes(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  b->Args({64, 56, 64, 3, 1})->Args({128, 28, 128, 3, 1})->Args({256, 14, 256, 3, 1});
  b->Args({512, 7, 512, 3, 1})->Args({3, 224, 64, 7, 2});
  b->Args({3, 224, 32, 3, 2});  // mobilenet_v2's stem
  b->Args({3, 224, 16, 3, 2});  // mobilenet_v3_small's
  b->Args({64, 56, 128, 3, 2})->Args({128, 28, 256, 3, 2})->Args({256, 14, 512, 3, 2});
}

// A 3x3 stride-1 pad-1 conv of N images of C x H x H into M channels (bias, fused Relu)
// by the direct conv (winograd 0) or the Winograd conv (1). GFLOP/s counts the direct
// conv's multiply-adds for both, so the two columns compare as speeds.
void BM_Conv3x3(benchmark::State& state) {
  const int64_t c = state.range(0), h = state.range(1), m = state.range(2);
  const int64_t n = state.range(3);
  const bool winograd = state.range(4) != 0;
  ConvAttrs a;
  a.pads = {1, 1, 1, 1};
  a.activation.kind = ConvActivation::kRelu;
  const int64_t xs[] = {h, h}, ks[] = {3, 3};
  const ConvGeometry g = *MakeConvGeometry("Conv", a, xs, ks, false);
  const int64_t kk = c * 9;
  std::vector<float> w = Filled(m * kk, 0.01f), x = Filled(n * c * h * h, 0.25f), bias(m, 0.5f);
  std::vector<float> y(n * m * g.out_plane());
  const cpu::PackedMatrix packed = cpu::PackedMatrix::Pack(
      cpu::PackedMatrix::Side::kA, cpu::MatrixRef{w.data(), kk, false}, m, kk);
  const auto u = cpu::PackWinogradWeight(w.data(), m, c);
  std::vector<float> scratch(winograd ? cpu::WinogradConvScratchFloats(g, n, c, m)
                                      : cpu::DirectConvScratchFloats(g, n, c, m));
  for (auto _ : state) {
    if (winograd) {
      cpu::WinogradConv(g, *u, n, c, m, x.data(), bias.data(), a.activation, scratch.data(),
                        y.data());
    } else {
      cpu::DirectConv(g, packed, n, c, m, x.data(), bias.data(), a.activation, scratch.data(),
                      y.data());
    }
    benchmark::DoNotOptimize(y.data());
  }
  SetCounters(state, m, n * g.out_plane(), kk);
}

// resnet18's 3x3 stride-1 convs at batch 1 and 8, each by both kernels.
void Conv3x3Shapes(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  for (int64_t n : {1, 8}) {
    for (const auto& [c, h] : {std::pair<int64_t, int64_t>{64, 56}, {128, 28}, {256, 14},
                               {512, 7}}) {
      for (int64_t wino : {0, 1}) b->Args({c, h, c, n, wino});
    }
  }
}

// PointwiseShapes as C, H, M, 1, 1 (DirectConvSuits turns these down; here to compare).
void DirectPointwiseShapes(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  b->Args({16, 112, 96, 1, 1})->Args({144, 56, 24, 1, 1})->Args({32, 28, 192, 1, 1});
  b->Args({384, 14, 64, 1, 1})->Args({960, 7, 160, 1, 1});
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
BENCHMARK(BM_FmaPeak)->UseRealTime();
BENCHMARK(BM_PackedConvGemm)->Apply(ConvShapes);
BENCHMARK(BM_DirectConv)->Apply(DirectConvShapes);
BENCHMARK(BM_Conv3x3)->Apply(Conv3x3Shapes);
BENCHMARK(BM_PackedConvGemm)->Apply(PointwiseShapes)->Name("BM_PackedConvGemm/pointwise");
BENCHMARK(BM_DirectConv)->Apply(DirectPointwiseShapes)->Name("BM_DirectConv/pointwise");

}  // namespace
}  // namespace ndserve::kernels

BENCHMARK_MAIN();
