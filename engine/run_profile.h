#ifndef NDSERVE_ENGINE_RUN_PROFILE_H_
#define NDSERVE_ENGINE_RUN_PROFILE_H_

// An opt-in per-node timing of predictor runs, for benchmarks/models_benchmark --profile
// (docs/design.md §4.5): where a model's time goes, by node (with its shapes) and by op
// kind, to set beside ONNX Runtime's own profile of the same model. Off unless a
// profile is made active; then PredictorContext::Run times each node's call (its wall
// time on the calling thread, which includes waiting for the intra-op pool's join).
// With none active the run pays one branch per node.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "engine/graph.h"
#include "kernels/tensor_view.h"

namespace ndserve::engine {

// Per-node totals over the runs recorded into it. Thread-safe.
class RunProfile {
 public:
  struct NodeStat {
    std::string name;
    std::string op;
    std::string shapes;  // "1x64x56x56 64x64x3x3 -> 1x64x56x56"
    double flops = 0;    // per call, for Conv, ConvTranspose, Gemm and MatMul; else 0
    double seconds = 0;  // summed over calls
    int64_t calls = 0;
  };

  // One call of `node` that took `seconds`, with these input and output shapes.
  void RecordNode(const Node& node, absl::Span<const kernels::ShapeSpan> inputs,
                  absl::Span<const kernels::ShapeSpan> outputs, double seconds);
  // One whole run (every node), for the share the nodes' sum leaves outside them.
  void RecordRun(double seconds);

  // Nodes in graph order of first call.
  std::vector<NodeStat> Nodes() const;
  int64_t runs() const;
  // A text report: time per run by op kind, then the `top` slowest nodes, each sorted
  // by time, with shares of the run and GFLOP/s where the op has a FLOP count.
  std::string Report(int top) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<NodeStat> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> index_ ABSL_GUARDED_BY(mu_);  // name + shapes
  double run_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t runs_ ABSL_GUARDED_BY(mu_) = 0;
};

// Multiply-adds times two of one call of `op` with these shapes (Conv, ConvTranspose,
// Gemm, MatMul; 0 for every other op).
double NodeFlops(kernels::OpKind op, absl::Span<const kernels::ShapeSpan> inputs,
                 absl::Span<const kernels::ShapeSpan> outputs);

// The process-wide profile runs record into; null (the default) records nothing. The
// caller keeps `profile` alive until it sets another.
void SetActiveRunProfile(RunProfile* profile);
RunProfile* ActiveRunProfile();

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_RUN_PROFILE_H_
