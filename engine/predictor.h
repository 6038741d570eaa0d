#ifndef NDSERVE_ENGINE_PREDICTOR_H_
#define NDSERVE_ENGINE_PREDICTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/cuda_graph_cache.h"
#include "engine/inference_request.h"
#include "engine/model.h"
#include "engine/signature.h"
#include "kernels/dispatch.h"
#include "kernels/gpu_resources.h"
#include "kernels/kernel_context.h"
#include "memory/nd_manager.h"
#include "memory/pool.h"

namespace ndserve::engine {

// One instance of a model on its device: what runs requests, one at a time.
//
// Ownership: shares the Model (parameters); owns a predictor-level NDManager
// ("predictor/<model>:<version>#<index>", a child of the model manager) under which each
// request opens its PredictorContext, and on a GPU its own stream, cuBLAS handle and
// error flags (GpuResources). After warm-up the manager is capped: a request can only
// allocate in its own context, so anything that would leak into the predictor fails
// loudly and is counted. Not thread-safe: one request at a time (PredictorPool hands a
// predictor to one caller at a time).
//
// On a GPU (docs/design.md §4.3) a run stages its inputs and outputs through the GPU's
// pinned pool and synchronizes its stream once; cuBLAS works in a block of the device
// pool held in the predictor's manager (kCublasWorkspaceBytes) and uses TF32 when the
// config's `tf32` is on. With `cuda_graphs` on and a graph that can be captured (no
// host-placed node: those run CPU code on per-request host buffers between kernels), the
// predictor owns a CudaGraphCache. The request on which it says to capture a key is
// answered by a plain run, which leaves that run's buffers cached in the pool on this
// thread; the same run is then recorded between BeginCapture and EndCapture in a manager
// of its own under the predictor's ("graph/..."), whose buffers (allocated from that
// cache, so no cudaMalloc breaks the capture) stay for the graph's lifetime. Later runs
// of the key copy their inputs into those buffers and replay the graph. A capture that
// fails is logged, and the key runs plainly from then on.
class Predictor {
 public:
  // Looks up the kernel of every node on the model's device (UNIMPLEMENTED naming the op
  // when one is missing) and opens the manager.
  static absl::StatusOr<std::unique_ptr<Predictor>> Create(std::shared_ptr<const Model> model,
                                                           int index);
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  // Runs one validated request in a fresh PredictorContext and returns the outputs
  // `plan` asks for, copied to host memory before the context closed.
  absl::StatusOr<InferenceResponse> Predict(const InferenceRequest& request,
                                            const ValidatedRequest& plan);

  // Runs one zero-filled request with the declared shapes (variable dims as 1; where the
  // graph refuses those shapes, the batch as 1 and the other variable dims as 64), then
  // caps the predictor manager. Errors make the model fail to load, except a graph that
  // refuses both made-up shapes (INVALID_ARGUMENT): it loads with a warning and no
  // warm-up. `cancel` (optional) stops it before its next node with CANCELLED.
  absl::Status WarmUp(const std::atomic<bool>* cancel = nullptr);

  // cuBLAS's working space per GPU predictor: cuBLAS's own default on GPUs before
  // Hopper, ample for the GEMMs of a served model.
  static constexpr int64_t kCublasWorkspaceBytes = int64_t{4} << 20;

  const std::shared_ptr<NDManager>& manager() const { return manager_; }
  // The GPU resources (stream counters), or null on the CPU.
  const kernels::GpuResources* gpu() const { return gpu_.get(); }
  // The CUDA graph cache, or null when graphs are off, on the CPU, or not capturable.
  const CudaGraphCache* graphs() const { return graphs_.get(); }
  const Model& model() const { return *model_; }
  int index() const { return index_; }

  // A captured CUDA graph and the buffers it uses (predictor.cc).
  struct CapturedRun;

  // Closes the predictor manager (and any context left under it).
  absl::Status Close();

 private:
  // One zero-filled run with variable dims as `first_dim` (dim 0) and `other_dims`.
  absl::Status WarmUpWith(int64_t first_dim, int64_t other_dims,
                          const std::atomic<bool>* cancel);
  Predictor(std::shared_ptr<const Model> model, int index)
      : model_(std::move(model)), index_(index) {}

  absl::StatusOr<InferenceResponse> RunPlain(const InferenceRequest& request,
                                             const ValidatedRequest& plan);
  // Captures the run of `request` (already answered by RunPlain) into a graph the cache
  // keeps; a failure is logged and the key marked (CudaGraphCache::CaptureFailed).
  void Capture(const CudaGraphKey& key, const InferenceRequest& request,
               const ValidatedRequest& plan);
  absl::StatusOr<InferenceResponse> Replay(CapturedRun& run, const InferenceRequest& request,
                                           const ValidatedRequest& plan);
  // Launches `run` (its inputs already queued), copies the outputs `plan` asks for into
  // `response` after the run's one synchronization.
  absl::Status LaunchAndFetch(CapturedRun& run, const ValidatedRequest& plan,
                              InferenceResponse& response);

  std::shared_ptr<const Model> model_;
  const int index_;
  std::shared_ptr<NDManager> manager_;
  std::unique_ptr<kernels::GpuResources> gpu_;
  Pool* pinned_ = nullptr;  // the GPU's pinned-host pool
  std::unique_ptr<CudaGraphCache> graphs_;
  uint64_t graphs_made_ = 0;
  kernels::KernelContext kernel_context_;
  std::vector<kernels::KernelFn> kernels_;  // per graph node
  uint64_t requests_ = 0;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_PREDICTOR_H_
