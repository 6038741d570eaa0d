#ifndef NDSERVE_ENGINE_CUDA_GRAPH_CACHE_H_
#define NDSERVE_ENGINE_CUDA_GRAPH_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace ndserve::engine {

// What a captured graph is keyed by: the model version and the shape of every input,
// in the signature's order. A graph replays fixed addresses and sizes, so any other
// shape needs its own capture.
struct CudaGraphKey {
  int64_t version = 0;
  std::vector<std::vector<int64_t>> input_shapes;

  friend bool operator==(const CudaGraphKey&, const CudaGraphKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const CudaGraphKey& k) {
    return H::combine(std::move(h), k.version, k.input_shapes);
  }
};

// The bookkeeping of one predictor's CUDA graphs (docs/design.md §4.3): when to capture
// a run, which captured graphs to keep, and freeing them. It holds graphs as opaque
// handles (a cudaGraphExec_t on a GPU, anything in tests) and never calls CUDA itself:
// whoever captures hands the handle in, and `deleter` frees it on eviction, Clear and
// destruction.
//
// Policy: a key is captured on its `capture_after`-th sighting (shapes seen once or
// twice are not worth a capture, which costs several plain runs); a key whose capture
// failed is not tried again; at most `max_graphs` graphs are kept, the least recently
// replayed evicted first; at most `max_tracked_keys` keys are counted, after which the
// counts start over (a workload with that many distinct shapes gains nothing from
// graphs, and the counts must not grow with the shapes clients send).
//
// Ownership: owns the handles inserted until they are deleted. Not thread-safe: one per
// predictor, which runs one request at a time.
class CudaGraphCache {
 public:
  struct Options {
    int capture_after = 3;        // sightings of a key before its run is captured (>= 1)
    int max_graphs = 8;           // captured graphs kept (>= 1)
    int max_tracked_keys = 1024;  // keys counted before the counts start over (>= 1)
  };
  using Handle = void*;
  using Deleter = std::function<void(Handle)>;

  enum class Action {
    kRun,      // run as usual
    kCapture,  // capture this run, then Insert (or CaptureFailed)
    kReplay,   // launch `graph` instead of running
  };
  struct Decision {
    Action action = Action::kRun;
    Handle graph = nullptr;  // kReplay only
  };

  struct Stats {
    uint64_t replays = 0;
    uint64_t captures = 0;
    uint64_t failed_captures = 0;
    uint64_t evictions = 0;
  };

  CudaGraphCache(Options options, Deleter deleter);
  ~CudaGraphCache();
  CudaGraphCache(const CudaGraphCache&) = delete;
  CudaGraphCache& operator=(const CudaGraphCache&) = delete;

  // What to do for a run of `key`; counts the sighting. A replayed graph becomes the
  // most recently used.
  Decision Decide(const CudaGraphKey& key);
  // The run Decide asked to capture produced `graph`; it is kept (evicting the least
  // recently used graph past max_graphs) and replayed from the next sighting on.
  void Insert(const CudaGraphKey& key, Handle graph);
  // The capture Decide asked for failed (an op that cannot be captured); the key runs
  // as usual from now on.
  void CaptureFailed(const CudaGraphKey& key);
  // Deletes every graph and forgets every count (e.g. before the buffers the graphs
  // use are released).
  void Clear();

  int size() const { return static_cast<int>(lru_.size()); }
  const Stats& stats() const { return stats_; }

 private:
  using Entry = std::pair<CudaGraphKey, Handle>;
  static constexpr int kNever = -1;  // a sighting count: capture failed

  const Options options_;
  const Deleter deleter_;
  std::list<Entry> lru_;  // most recently used first
  absl::flat_hash_map<CudaGraphKey, std::list<Entry>::iterator> graphs_;
  absl::flat_hash_map<CudaGraphKey, int> sightings_;  // keys without a graph
  Stats stats_;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_CUDA_GRAPH_CACHE_H_
