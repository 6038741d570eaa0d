#include "engine/predictor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/predictor_context.h"
#include "base/status_macros.h"

namespace ndserve::engine {

absl::StatusOr<std::unique_ptr<Predictor>> Predictor::Create(std::shared_ptr<const Model> model,
                                                             int index) {
  std::unique_ptr<Predictor> p(new Predictor(std::move(model), index));
  const Model& m = *p->model_;
  for (const Node& node : m.graph().nodes()) {
    // Host-placed shape arithmetic runs the CPU kernels whatever the model's device.
    absl::StatusOr<kernels::KernelFn> fn =
        kernels::Lookup(node.op, node.on_host ? Device::Cpu() : m.device());
    if (!fn.ok()) {
      return absl::Status(fn.status().code(),
                          absl::StrCat("node '", node.name, "': ", fn.status().message()));
    }
    p->kernels_.push_back(*fn);
  }
  if (m.device().is_cuda()) {
    NDS_ASSIGN_OR_RETURN(p->gpu_, kernels::GpuResources::Create(m.device()));
    p->kernel_context_ = p->gpu_->context();
  } else {
    p->kernel_context_ = kernels::KernelContext::Cpu();
    p->kernel_context_.device = m.device();
  }
  NDS_ASSIGN_OR_RETURN(
      p->manager_,
      m.manager()->NewSubManager(ManagerLevel::kPredictor, absl::StrCat("predictor/", m.name(), ":",
                                                                        m.version(), "#", index)));
  return p;
}

Predictor::~Predictor() { Close().IgnoreError(); }

absl::StatusOr<InferenceResponse> Predictor::Predict(const InferenceRequest& request,
                                                     const ValidatedRequest& plan) {
  const absl::Time start = absl::Now();
  NDS_ASSIGN_OR_RETURN(
      std::shared_ptr<NDManager> ctx_manager,
      manager_->NewSubManager(ManagerLevel::kContext,
                              absl::StrCat("ctx/", manager_->name(), "/", ++requests_)));
  PredictorContext ctx(*model_, kernels_, kernel_context_, gpu_.get(), std::move(ctx_manager));
  for (int i = 0; i < static_cast<int>(plan.input_tensor.size()); ++i) {
    const InferInputTensor& t = request.inputs[plan.input_tensor[i]];
    NDS_RETURN_IF_ERROR(ctx.SetInput(i, t.shape, t.data));
  }
  const absl::Time uploaded = absl::Now();
  NDS_RETURN_IF_ERROR(ctx.Run(request.cancel));
  const absl::Time ran = absl::Now();
  InferenceResponse response;
  response.model_name = model_->name();
  response.model_version = model_->version();
  response.id = request.id;
  response.outputs.reserve(plan.outputs.size());
  for (int o : plan.outputs) {
    NDS_ASSIGN_OR_RETURN(InferOutputTensor out, ctx.CopyOutput(o));
    response.outputs.push_back(std::move(out));
  }
  response.timings.context_peak_bytes = ctx.peak_bytes();
  response.timings.context_output_bytes = ctx.output_bytes();
  NDS_RETURN_IF_ERROR(ctx.Close());
  const absl::Time done = absl::Now();
  response.timings.compute_input_ns = absl::ToInt64Nanoseconds(uploaded - start);
  response.timings.compute_infer_ns = absl::ToInt64Nanoseconds(ran - uploaded);
  response.timings.compute_output_ns = absl::ToInt64Nanoseconds(done - ran);
  return response;
}

absl::Status Predictor::WarmUp(const std::atomic<bool>* cancel) {
  const ModelSignature& sig = model_->signature();
  {
    NDS_ASSIGN_OR_RETURN(
        std::shared_ptr<NDManager> ctx_manager,
        manager_->NewSubManager(ManagerLevel::kContext,
                                absl::StrCat("ctx/", manager_->name(), "/warmup")));
    PredictorContext ctx(*model_, kernels_, kernel_context_, gpu_.get(), std::move(ctx_manager));
    bool runnable = true;
    for (int i = 0; i < static_cast<int>(sig.inputs.size()); ++i) {
      const TensorSpec& spec = sig.inputs[i];
      if (spec.any_rank) {
        runnable = false;  // no shape to make up; the first request checks the graph
        break;
      }
      std::vector<int64_t> shape = spec.dims;
      for (int64_t& d : shape) {
        if (d == kAnyDim) d = 1;
      }
      NDS_RETURN_IF_ERROR(ctx.SetZeroInput(i, shape));
    }
    if (runnable) {
      absl::Status status = ctx.Run(cancel);
      if (!status.ok()) {
        return absl::Status(status.code(), absl::StrCat("warm-up with zero-filled inputs failed: ",
                                                        status.message()));
      }
      for (int o = 0; o < static_cast<int>(sig.outputs.size()); ++o) {
        NDS_RETURN_IF_ERROR(ctx.CopyOutput(o).status());
      }
    }
    NDS_RETURN_IF_ERROR(ctx.Close());
  }
  manager_->Cap();
  return absl::OkStatus();
}

absl::Status Predictor::Close() {
  absl::Status status;
  if (manager_ != nullptr) status = manager_->Close();
  gpu_.reset();  // synchronizes its stream first
  return status;
}

}  // namespace ndserve::engine
