// The CPU's 3x3 depthwise Conv (kernels/cpu/depthwise_conv_kxk.h) at every depthwise
// shape of mobilenet_v2 at batch 1, bias and a fused Clip(0, 6) as the export has them,
// next to its floor in the same run: one pass that reads the input and writes the output
// (memcpy of each), the traffic no depthwise conv can avoid. Its GB/s count both.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "kernels/conv_geometry.h"
#include "kernels/cpu/depthwise_conv.h"
#include "kernels/cpu/depthwise_conv_c16.h"
#include "kernels/cpu/depthwise_conv_kxk.h"
#include "kernels/kernel_context.h"
#include "kernels/node_attrs.h"

namespace ndserve::kernels {
namespace {

// Scratch from one buffer, handed out again from its start on every Reset.
class BumpScratch : public ScratchAllocator {
 public:
  absl::StatusOr<void*> Allocate(std::size_t bytes) override {
    const std::size_t at = (used_ + 255) / 256 * 256;
    if (at + bytes > buffer_.size() * sizeof(float)) buffer_.resize((at + bytes) / 4 + 64);
    used_ = at + bytes;
    return static_cast<void*>(reinterpret_cast<char*>(Aligned()) + at);
  }
  void Reset() { used_ = 0; }

 private:
  float* Aligned() {
    auto p = reinterpret_cast<std::uintptr_t>(buffer_.data());
    return reinterpret_cast<float*>((p + 255) / 256 * 256);
  }
  std::vector<float> buffer_ = std::vector<float>(1 << 20);
  std::size_t used_ = 0;
};

struct Shape {
  ConvGeometry g;
  int64_t c;
};

Shape MakeShape(const benchmark::State& state, ConvAttrs* a) {
  const int64_t c = state.range(0), h = state.range(1), stride = state.range(2);
  a->strides = {stride, stride};
  a->pads = {1, 1, 1, 1};
  a->group = c;
  a->activation = {ConvActivation::kClip, 0.0f, 6.0f};
  const int64_t xs[] = {h, h}, ks[] = {3, 3};
  return {*MakeConvGeometry("Conv", *a, xs, ks, false), c};
}

void SetBytes(benchmark::State& state, const Shape& s) {
  const int64_t floats = s.c * (s.g.in_plane() + s.g.out_plane());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(floats * 4),
                                              benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

// Times `loop` (a call of one depthwise loop on the shape's x, w, bias and y with a
// scratch allocator) on the state's shape.
template <typename Loop>
void TimeLoop(benchmark::State& state, Loop loop) {
  ConvAttrs a;
  const Shape s = MakeShape(state, &a);
  std::vector<float> x(s.c * s.g.in_plane(), 0.25f), w(s.c * 9, 0.1f), bias(s.c, 0.5f);
  std::vector<float> y(s.c * s.g.out_plane());
  BumpScratch scratch;
  KernelContext ctx;
  ctx.scratch = &scratch;
  for (auto _ : state) {
    scratch.Reset();
    const absl::Status st = loop(ctx, s, a.activation, x.data(), w.data(), bias.data(), y.data());
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(y.data());
  }
  SetBytes(state, s);
}

// What the CPU Conv runs (cpu::DepthwiseConv picks the loop).
void BM_Depthwise3x3(benchmark::State& state) {
  TimeLoop(state, [](const KernelContext& ctx, const Shape& s, const ConvEpilogue& act,
                     const float* x, const float* w, const float* b, float* y) {
    return cpu::DepthwiseConv(ctx, s.g, 1, s.c, 1, x, w, b, act, y);
  });
}

// The loops the CPU Conv took before the in-plane loop (depthwise_conv_in_plane.h) where
// that one is chosen, called directly as its baseline in the same run: the sixteen-channel
// loop (range(3) 0) and the per-plane row loop (1).
void BM_Depthwise3x3Before(benchmark::State& state) {
  const bool c16 = state.range(3) == 0;
  TimeLoop(state, [c16](const KernelContext& ctx, const Shape& s, const ConvEpilogue& act,
                        const float* x, const float* w, const float* b, float* y) {
    return c16 ? cpu::DepthwiseC16(ctx, s.g, 1, s.c, x, w, b, act, y)
               : cpu::DepthwiseKxK(ctx, s.g, 1, s.c, 1, x, w, b, act, y);
  });
}

// The floor: the input read and the output written once, on one thread.
void BM_Depthwise3x3Floor(benchmark::State& state) {
  ConvAttrs a;
  const Shape s = MakeShape(state, &a);
  std::vector<float> x(s.c * s.g.in_plane(), 0.25f), y(s.c * s.g.out_plane());
  // Vectors of the input's bits, OR-ed together: a read at the cache's speed (a float
  // sum must keep its order, and a plain loop is left scalar at -O2).
  typedef std::uint32_t U4 __attribute__((vector_size(16)));
  std::vector<U4> bits(x.size() / 4);
  std::memcpy(bits.data(), x.data(), bits.size() * sizeof(U4));
  for (auto _ : state) {
    U4 a = {}, b = {};
    for (std::size_t i = 0; i + 1 < bits.size(); i += 2) a |= bits[i], b |= bits[i + 1];
    a |= b;
    std::fill(y.begin(), y.end(), static_cast<float>(a[0] & 1));
    benchmark::DoNotOptimize(y.data());
  }
  SetBytes(state, s);
}

// mobilenet_v2's depthwise convs at batch 1: channels, input size, stride.
void MobilenetV2Shapes(benchmark::internal::Benchmark* b) {
  b->UseRealTime();
  b->Args({32, 112, 1})->Args({96, 112, 2})->Args({144, 56, 1})->Args({144, 56, 2});
  b->Args({192, 28, 1})->Args({192, 28, 2})->Args({384, 14, 1})->Args({576, 14, 1});
  b->Args({576, 14, 2})->Args({960, 7, 1});
}

BENCHMARK(BM_Depthwise3x3)->Apply(MobilenetV2Shapes);
BENCHMARK(BM_Depthwise3x3Floor)->Apply(MobilenetV2Shapes);
BENCHMARK(BM_Depthwise3x3Before)
    ->UseRealTime()
    ->Args({96, 112, 2, 1})
    ->Args({144, 56, 2, 0})
    ->Args({192, 28, 2, 0})
    ->Args({576, 14, 2, 0})
    ->Args({32, 112, 1, 0})
    ->Args({144, 56, 1, 0})
    ->Args({192, 28, 1, 0})
    ->Args({384, 14, 1, 0})
    ->Args({576, 14, 1, 0});

}  // namespace
}  // namespace ndserve::kernels

BENCHMARK_MAIN();
