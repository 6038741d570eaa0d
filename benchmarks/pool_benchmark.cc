// Pools against glibc malloc/free and against the raw device allocator (no pool), on
// the same size sequences in the same run (docs/design.md §3):
//   Pair      alloc+free pairs, sizes 512 B .. 1 MiB (log-uniform)
//   Window    1,024 live blocks, one replaced at random per iteration
//   Holes     alloc+free pairs on a split pool holding 65,536 free holes
//   Pair/threads:2  the pair loop from two threads sharing one pool
// BinnedNoThreadCache / kNoThreadCache rows: the binned pool with its per-thread caches
// off (PoolOptions::thread_cache_bytes = 0), the shared lists alone.
// Set NDSERVE_BENCH_DEVICE=cuda:0 to run the pool rows over the CUDA allocator.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "memory/cuda_allocator.h"
#include "memory/pool.h"

namespace ndserve {
namespace {

constexpr std::size_t kSequence = 1 << 14;  // sizes cycled through (power of two)

std::vector<std::size_t> LogUniformSizes(std::size_t lo, std::size_t hi, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> exp(std::log2(double(lo)), std::log2(double(hi)));
  std::vector<std::size_t> sizes(kSequence);
  for (auto& s : sizes) s = static_cast<std::size_t>(std::exp2(exp(rng)));
  return sizes;
}

const std::vector<std::size_t>& PairSizes() {
  static const auto* sizes = new std::vector<std::size_t>(LogUniformSizes(512, 1 << 20, 1));
  return *sizes;
}

Device BenchDevice() {
  const char* env = std::getenv("NDSERVE_BENCH_DEVICE");
  if (env == nullptr) return Device::Cpu();
  absl::StatusOr<Device> d = ParseDevice(env);
  return d.ok() ? *d : Device::Cpu();
}

std::unique_ptr<DeviceAllocator> RawAllocator() {
  absl::StatusOr<std::unique_ptr<DeviceAllocator>> a = MakeDeviceAllocator(BenchDevice());
  if (!a.ok()) std::abort();
  return std::move(*a);
}

// The three kinds of thing measured, behind one shape so every loop is shared.
struct Handle {
  Block block;  // ptr and requested size for every backend; pools fill the rest
};

struct Malloc {
  Handle Alloc(std::size_t n) { return Handle{Block{std::malloc(n), n}}; }
  void Free(const Handle& h) { std::free(h.block.ptr); }
};

struct Raw {
  std::unique_ptr<DeviceAllocator> a = RawAllocator();
  Handle Alloc(std::size_t n) { return Handle{Block{*a->Allocate(n), n}}; }
  void Free(const Handle& h) { a->Deallocate(h.block.ptr, h.block.requested); }
};

// Options of each pool row: the defaults, or (kNoThreadCache) the binned pool with its
// per-thread caches off, to show what they are worth in the same run.
constexpr std::size_t kDefaultCache = kDefaultThreadCacheBytes, kNoThreadCache = 0;

PoolOptions WithThreadCache(std::size_t bytes) {
  PoolOptions options;
  options.thread_cache_bytes = bytes;
  return options;
}

template <PoolKind K, std::size_t kCache = kDefaultCache>
struct PoolBackend {
  std::unique_ptr<Pool> pool = MakePool(K, RawAllocator(), WithThreadCache(kCache));
  Handle Alloc(std::size_t n) {
    absl::StatusOr<Block> b = pool->Allocate(n);
    if (!b.ok()) std::abort();
    return Handle{*b};
  }
  void Free(const Handle& h) { pool->Free(h.block); }
};

// Pairs: allocate and free straight away.
template <typename Backend>
void BM_Pair(benchmark::State& state) {
  Backend b;
  const auto& sizes = PairSizes();
  std::size_t i = 0;
  for (auto _ : state) {
    Handle h = b.Alloc(sizes[i++ & (kSequence - 1)]);
    benchmark::DoNotOptimize(h.block.ptr);
    b.Free(h);
  }
  state.SetItemsProcessed(state.iterations());
}

// Pool backends used from several threads need a Block per thread, not `last`.
template <PoolKind K, std::size_t kCache = kDefaultCache>
void BM_PairThreaded(benchmark::State& state) {
  // One pool per kind for the whole process, shared by the threads of every run.
  static Pool* const shared = MakePool(K, RawAllocator(), WithThreadCache(kCache)).release();
  const auto& sizes = PairSizes();
  std::size_t i = state.thread_index() * 7919;
  for (auto _ : state) {
    absl::StatusOr<Block> blk = shared->Allocate(sizes[i++ & (kSequence - 1)]);
    benchmark::DoNotOptimize(blk->ptr);
    shared->Free(*blk);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_PairThreadedMalloc(benchmark::State& state) {
  const auto& sizes = PairSizes();
  std::size_t i = state.thread_index() * 7919;
  for (auto _ : state) {
    void* p = std::malloc(sizes[i++ & (kSequence - 1)]);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  state.SetItemsProcessed(state.iterations());
}

// Window: 1,024 live blocks; each iteration frees a random one and allocates a new
// size in its place, so the allocator sees a realistic mix of lifetimes.
template <typename Backend>
void BM_Window(benchmark::State& state) {
  Backend b;
  constexpr std::size_t kLive = 1024;
  const auto& sizes = PairSizes();
  std::mt19937 rng(3);
  std::vector<Handle> live;
  std::size_t next = 0;
  for (std::size_t k = 0; k < kLive; ++k) live.push_back(b.Alloc(sizes[next++ & (kSequence - 1)]));
  std::vector<std::uint16_t> victims(kSequence);
  for (auto& v : victims) v = rng() % kLive;
  std::size_t i = 0;
  for (auto _ : state) {
    Handle& h = live[victims[i++ & (kSequence - 1)]];
    b.Free(h);
    h = b.Alloc(sizes[next++ & (kSequence - 1)]);
    benchmark::DoNotOptimize(h.block.ptr);
  }
  for (const Handle& h : live) b.Free(h);
  state.SetItemsProcessed(state.iterations());
}

// Holes: a split pool whose small segments hold 65,536 free holes between live
// blocks (nothing coalesces), then alloc+free pairs of small sizes: the best-fit index
// is searched among all those holes every time.
void BM_SplitWithHoles(benchmark::State& state) {
  std::unique_ptr<Pool> pool = MakePool(PoolKind::kSplit, RawAllocator());
  constexpr std::size_t kHoles = 65536;
  std::mt19937 rng(5);
  std::vector<Block> all;
  all.reserve(2 * kHoles);
  for (std::size_t i = 0; i < 2 * kHoles; ++i) {
    absl::StatusOr<Block> blk = pool->Allocate(512 * (1 + rng() % 8));
    if (!blk.ok()) std::abort();
    all.push_back(*blk);
  }
  for (std::size_t i = 0; i < all.size(); i += 2) pool->Free(all[i]);
  state.counters["holes"] = static_cast<double>(kHoles);
  state.counters["inactive_split_MiB"] =
      static_cast<double>(pool->Stats().inactive_split_bytes) / (1 << 20);
  const auto sizes = LogUniformSizes(512, 64 << 10, 9);
  std::size_t i = 0;
  for (auto _ : state) {
    absl::StatusOr<Block> blk = pool->Allocate(sizes[i++ & (kSequence - 1)]);
    benchmark::DoNotOptimize(blk->ptr);
    pool->Free(*blk);
  }
  for (std::size_t k = 1; k < all.size(); k += 2) pool->Free(all[k]);
  state.SetItemsProcessed(state.iterations());
}

// The same loop on malloc, with the same 65,536 holes punched into its heap.
void BM_MallocWithHoles(benchmark::State& state) {
  constexpr std::size_t kHoles = 65536;
  std::mt19937 rng(5);
  std::vector<void*> all(2 * kHoles);
  for (auto& p : all) p = std::malloc(512 * (1 + rng() % 8));
  for (std::size_t i = 0; i < all.size(); i += 2) std::free(all[i]);
  const auto sizes = LogUniformSizes(512, 64 << 10, 9);
  std::size_t i = 0;
  for (auto _ : state) {
    void* p = std::malloc(sizes[i++ & (kSequence - 1)]);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
  for (std::size_t k = 1; k < all.size(); k += 2) std::free(all[k]);
  state.SetItemsProcessed(state.iterations());
}

using Binned = PoolBackend<PoolKind::kBinned>;
using BinnedNoThreadCache = PoolBackend<PoolKind::kBinned, kNoThreadCache>;
using Split = PoolBackend<PoolKind::kSplit>;
using Simple = PoolBackend<PoolKind::kSimple>;
using NoPool = PoolBackend<PoolKind::kNone>;

BENCHMARK_TEMPLATE(BM_Pair, Malloc);
BENCHMARK_TEMPLATE(BM_Pair, Raw);
BENCHMARK_TEMPLATE(BM_Pair, Binned);
BENCHMARK_TEMPLATE(BM_Pair, BinnedNoThreadCache);
BENCHMARK_TEMPLATE(BM_Pair, Split);
BENCHMARK_TEMPLATE(BM_Pair, Simple);
BENCHMARK_TEMPLATE(BM_Pair, NoPool);

BENCHMARK_TEMPLATE(BM_Window, Malloc);
BENCHMARK_TEMPLATE(BM_Window, Raw);
BENCHMARK_TEMPLATE(BM_Window, Binned);
BENCHMARK_TEMPLATE(BM_Window, BinnedNoThreadCache);
BENCHMARK_TEMPLATE(BM_Window, Split);
BENCHMARK_TEMPLATE(BM_Window, Simple);
BENCHMARK_TEMPLATE(BM_Window, NoPool);

BENCHMARK(BM_MallocWithHoles);
BENCHMARK(BM_SplitWithHoles);

BENCHMARK(BM_PairThreadedMalloc)->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(BM_PairThreaded, PoolKind::kBinned)->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(BM_PairThreaded, PoolKind::kBinned, kNoThreadCache)->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(BM_PairThreaded, PoolKind::kSplit)->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(BM_PairThreaded, PoolKind::kSimple)->Threads(2)->UseRealTime();
BENCHMARK_TEMPLATE(BM_PairThreaded, PoolKind::kNone)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace ndserve

BENCHMARK_MAIN();
