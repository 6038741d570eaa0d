#ifndef NDSERVE_ENGINE_PREDICTOR_H_
#define NDSERVE_ENGINE_PREDICTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/inference_request.h"
#include "engine/model.h"
#include "engine/signature.h"
#include "kernels/dispatch.h"
#include "kernels/gpu_resources.h"
#include "kernels/kernel_context.h"
#include "memory/nd_manager.h"

namespace ndserve::engine {

// One instance of a model on its device: what runs requests, one at a time.
//
// Ownership: shares the Model (parameters); owns a predictor-level NDManager
// ("predictor/<model>:<version>#<index>", a child of the model manager) under which each
// request opens its PredictorContext, and on a GPU its own stream, cuBLAS handle and
// error flag (GpuResources). After warm-up the manager is capped: a request can only
// allocate in its own context, so anything that would leak into the predictor fails
// loudly and is counted. Not thread-safe: one request at a time (PredictorPool hands a
// predictor to one caller at a time).
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

  // Runs one zero-filled request with the declared shapes (variable dims as 1), then
  // caps the predictor manager. Errors make the model fail to load; `cancel` (optional)
  // stops it before its next node with CANCELLED.
  absl::Status WarmUp(const std::atomic<bool>* cancel = nullptr);

  const std::shared_ptr<NDManager>& manager() const { return manager_; }
  const Model& model() const { return *model_; }
  int index() const { return index_; }

  // Closes the predictor manager (and any context left under it).
  absl::Status Close();

 private:
  Predictor(std::shared_ptr<const Model> model, int index)
      : model_(std::move(model)), index_(index) {}

  std::shared_ptr<const Model> model_;
  const int index_;
  std::shared_ptr<NDManager> manager_;
  std::unique_ptr<kernels::GpuResources> gpu_;
  kernels::KernelContext kernel_context_;
  std::vector<kernels::KernelFn> kernels_;  // per graph node
  uint64_t requests_ = 0;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_PREDICTOR_H_
