#include "engine/predictor.h"

#include <cstring>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/pinned_staging.h"
#include "engine/predictor_context.h"
#include "memory/memory_system.h"

namespace ndserve::engine {

// A captured run (docs/design.md §4.3): the instantiated graph and the device buffers it
// reads and writes, which live in `manager` (a child of the predictor's manager) for as
// long as the graph does.
struct Predictor::CapturedRun {
  std::shared_ptr<NDManager> manager;
  void* exec = nullptr;                                 // cudaGraphExec_t
  std::vector<PredictorContext::DeviceBuffer> inputs;   // per model input
  std::vector<PredictorContext::DeviceBuffer> outputs;  // per model output
  uint64_t peak_bytes = 0;
};

namespace {

// The cache's deleter; runs only while the predictor's stream is idle (every run
// synchronizes before it returns), so the buffers may go back to the pool.
void DeleteCapturedRun(void* handle) {
  auto* run = static_cast<Predictor::CapturedRun*>(handle);
  kernels::GpuResources::DestroyGraph(run->exec);
  if (run->manager != nullptr) {
    absl::Status closed = run->manager->Close();
    if (!closed.ok()) LOG(ERROR) << "closing a CUDA graph's buffers: " << closed;
  }
  delete run;
}

// Host code between kernels on per-request host buffers cannot be replayed, and neither
// can a run whose path or sizes the data decides (an If's branch, NonZero's count).
bool Capturable(const Graph& graph) {
  for (const Node& node : graph.nodes()) {
    const kernels::OpInfo& info = kernels::GetOpInfo(node.op);
    if (node.on_host || node.has_dynamic_attrs() || info.data_shape || info.control ||
        !node.guards.empty()) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Predictor>> Predictor::Create(std::shared_ptr<const Model> model,
                                                             int index) {
  std::unique_ptr<Predictor> p(new Predictor(std::move(model), index));
  const Model& m = *p->model_;
  for (const Node& node : m.graph().nodes()) {
    if (kernels::GetOpInfo(node.op).control) {  // the context runs it (RunIf)
      p->kernels_.push_back(nullptr);
      continue;
    }
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
    // One error flag per node, read after the run's one synchronization.
    NDS_ASSIGN_OR_RETURN(p->gpu_, kernels::GpuResources::Create(
                                      m.device(), static_cast<int>(m.graph().nodes().size())));
    NDS_RETURN_IF_ERROR(p->gpu_->SetTf32(m.config().tf32));
    p->gpu_->SetCublasLt(m.config().cublaslt);
    NDS_ASSIGN_OR_RETURN(p->pinned_, m.memory()->GetPool(Device::CudaHost(m.device().ordinal)));
  } else {
    p->kernel_context_ = kernels::KernelContext::Cpu();
    p->kernel_context_.device = m.device();
  }
  NDS_ASSIGN_OR_RETURN(
      p->manager_,
      m.manager()->NewSubManager(ManagerLevel::kPredictor, absl::StrCat("predictor/", m.name(), ":",
                                                                        m.version(), "#", index)));
  if (p->gpu_ != nullptr) {
    // Before the cap: the workspace belongs to the predictor, so cuBLAS never allocates
    // on the request path (nor inside a graph capture).
    const int64_t bytes = kCublasWorkspaceBytes;
    NDS_ASSIGN_OR_RETURN(NDArray workspace, p->manager_->Create(absl::MakeConstSpan(&bytes, 1),
                                                                DType::kUint8, "cublas_workspace"));
    NDS_ASSIGN_OR_RETURN(void* data, workspace.Data());
    NDS_RETURN_IF_ERROR(p->gpu_->SetCublasWorkspace(data, static_cast<std::size_t>(bytes)));
    // The kernels' copy of the context, taken once every setting above is in it.
    p->kernel_context_ = p->gpu_->context();
    if (m.config().cuda_graphs && Capturable(m.graph())) {
      p->graphs_ = std::make_unique<CudaGraphCache>(CudaGraphCache::Options{}, &DeleteCapturedRun);
    }
  }
  return p;
}

Predictor::~Predictor() { Close().IgnoreError(); }

absl::StatusOr<InferenceResponse> Predictor::Predict(const InferenceRequest& request,
                                                     const ValidatedRequest& plan) {
  if (graphs_ != nullptr) {
    CudaGraphKey key;
    key.version = model_->version();
    key.input_shapes.reserve(plan.input_tensor.size());
    for (int t : plan.input_tensor) key.input_shapes.push_back(request.inputs[t].shape);
    const CudaGraphCache::Decision decision = graphs_->Decide(key);
    if (decision.action == CudaGraphCache::Action::kReplay) {
      return Replay(*static_cast<CapturedRun*>(decision.graph), request, plan);
    }
    if (decision.action == CudaGraphCache::Action::kCapture) {
      // Answered by a plain run, then captured: a capture that fails costs the request
      // nothing but time.
      NDS_ASSIGN_OR_RETURN(InferenceResponse response, RunPlain(request, plan));
      Capture(key, request, plan);
      return response;
    }
  }
  return RunPlain(request, plan);
}

absl::StatusOr<InferenceResponse> Predictor::RunPlain(const InferenceRequest& request,
                                                      const ValidatedRequest& plan) {
  const absl::Time start = absl::Now();
  NDS_ASSIGN_OR_RETURN(
      std::shared_ptr<NDManager> ctx_manager,
      manager_->NewSubManager(ManagerLevel::kContext,
                              absl::StrCat("ctx/", manager_->name(), "/", ++requests_)));
  PredictorContext ctx(*model_, kernels_, kernel_context_, gpu_.get(), std::move(ctx_manager),
                       pinned_);
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
  NDS_ASSIGN_OR_RETURN(response.outputs, ctx.FetchOutputs(plan.outputs));
  response.timings.context_peak_bytes = ctx.peak_bytes();
  response.timings.context_output_bytes = ctx.output_bytes();
  NDS_RETURN_IF_ERROR(ctx.Close());
  const absl::Time done = absl::Now();
  response.timings.compute_input_ns = absl::ToInt64Nanoseconds(uploaded - start);
  response.timings.compute_infer_ns = absl::ToInt64Nanoseconds(ran - uploaded);
  response.timings.compute_output_ns = absl::ToInt64Nanoseconds(done - ran);
  return response;
}

void Predictor::Capture(const CudaGraphKey& key, const InferenceRequest& request,
                        const ValidatedRequest& plan) {
  // The plain run of this request just gave its buffers back to the pool on this
  // thread: the capture's allocations, the same sizes in the same order, find them
  // cached. A pool miss would call cudaMalloc, which fails a thread-local capture.
  absl::StatusOr<std::shared_ptr<NDManager>> graph_manager = manager_->NewSubManager(
      ManagerLevel::kPredictor, absl::StrCat("graph/", manager_->name(), "/", ++graphs_made_));
  if (!graph_manager.ok()) {
    LOG(WARNING) << "model " << model_->name() << ":" << model_->version()
                 << ": no scope for a CUDA graph: " << graph_manager.status();
    return;  // not the shapes' fault: tried again on the next sighting
  }
  // The graph's buffers: a predictor-level scope of their own, not a request's (a
  // request scope closes with its response, and a replay would write freed memory).
  auto run = std::make_unique<CapturedRun>();
  run->manager = *graph_manager;
  PredictorContext ctx(*model_, kernels_, kernel_context_, gpu_.get(), run->manager, pinned_);
  auto failed = [&](const absl::Status& why) {
    gpu_->AbortCapture();
    if (run->exec != nullptr) kernels::GpuResources::DestroyGraph(run->exec);
    ctx.Close().IgnoreError();  // waits for the input copies, frees the buffers
    run->manager->Close().IgnoreError();  // also after a failed Detach
    if (why.code() == absl::StatusCode::kCancelled) return;  // asked again next time
    LOG(WARNING) << "model " << model_->name() << ":" << model_->version()
                 << ": CUDA graph capture failed, these shapes run without one: " << why;
    graphs_->CaptureFailed(key);
  };
  // The inputs are copied before the capture starts: a replay copies its own request's
  // into the same buffers.
  for (int i = 0; i < static_cast<int>(plan.input_tensor.size()); ++i) {
    const InferInputTensor& t = request.inputs[plan.input_tensor[i]];
    if (absl::Status s = ctx.SetInput(i, t.shape, t.data); !s.ok()) return failed(s);
  }
  if (absl::Status s = gpu_->BeginCapture(); !s.ok()) return failed(s);
  if (absl::Status s = ctx.Run(request.cancel); !s.ok()) return failed(s);
  absl::StatusOr<void*> exec = gpu_->EndCapture();
  if (!exec.ok()) return failed(exec.status());
  run->exec = *exec;
  for (int i = 0; i < static_cast<int>(model_->graph().inputs().size()); ++i) {
    absl::StatusOr<PredictorContext::DeviceBuffer> b = ctx.InputBuffer(i);
    if (!b.ok()) return failed(b.status());
    run->inputs.push_back(*std::move(b));
  }
  for (int o = 0; o < static_cast<int>(model_->graph().outputs().size()); ++o) {
    absl::StatusOr<PredictorContext::DeviceBuffer> b = ctx.OutputBuffer(o);
    if (!b.ok()) return failed(b.status());
    run->outputs.push_back(*std::move(b));
  }
  run->peak_bytes = ctx.peak_bytes();
  // The input copies must be done before their pinned blocks go back.
  if (absl::Status s = gpu_->Synchronize(); !s.ok()) return failed(s);
  if (absl::Status s = ctx.Detach(); !s.ok()) return failed(s);
  graphs_->Insert(key, run.release());  // the cache owns it from here
}

absl::StatusOr<InferenceResponse> Predictor::Replay(CapturedRun& run,
                                                    const InferenceRequest& request,
                                                    const ValidatedRequest& plan) {
  const absl::Time start = absl::Now();
  ++requests_;
  PinnedStaging staging(pinned_);
  InferenceResponse response;
  // Every error after the first queued copy waits for the stream before the pinned
  // blocks go back (the staging destructor).
  auto queued = [&]() -> absl::Status {
    for (int i = 0; i < static_cast<int>(plan.input_tensor.size()); ++i) {
      const InferInputTensor& t = request.inputs[plan.input_tensor[i]];
      const PredictorContext::DeviceBuffer& dst = run.inputs[i];
      if (t.data.size() != dst.bytes) {
        return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "' has ", t.data.size(),
                                                       " bytes, its shape needs ", dst.bytes));
      }
      NDS_ASSIGN_OR_RETURN(void* staged, staging.Take(dst.bytes));
      if (dst.bytes > 0) std::memcpy(staged, t.data.data(), dst.bytes);
      NDS_RETURN_IF_ERROR(gpu_->CopyToDevice(dst.data, staged, dst.bytes));
    }
    return LaunchAndFetch(run, plan, response);
  }();
  if (!queued.ok()) {
    gpu_->Synchronize().IgnoreError();
    return queued;
  }
  response.id = request.id;
  response.timings.compute_infer_ns = absl::ToInt64Nanoseconds(absl::Now() - start);
  return response;
}

absl::Status Predictor::LaunchAndFetch(CapturedRun& run, const ValidatedRequest& plan,
                                       InferenceResponse& response) {
  PinnedStaging staging(pinned_);
  response.model_name = model_->name();
  response.model_version = model_->version();
  response.timings.context_peak_bytes = run.peak_bytes;
  // Nothing queued can write a flag: the previous run synchronized before returning.
  gpu_->ClearErrorFlags();
  NDS_RETURN_IF_ERROR(gpu_->LaunchGraph(run.exec));
  response.outputs.resize(plan.outputs.size());
  absl::InlinedVector<const void*, 4> staged(plan.outputs.size(), nullptr);
  for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
    const PredictorContext::DeviceBuffer& src = run.outputs[plan.outputs[i]];
    InferOutputTensor& out = response.outputs[i];
    out.name = model_->graph().outputs()[plan.outputs[i]].name;
    out.dtype = src.dtype;
    out.shape = src.shape;
    out.data.resize(src.bytes);
    NDS_ASSIGN_OR_RETURN(void* dst, staging.Take(src.bytes));
    staged[i] = dst;
    NDS_RETURN_IF_ERROR(gpu_->CopyToHost(dst, src.data, src.bytes));
  }
  NDS_RETURN_IF_ERROR(gpu_->Synchronize());
  if (int slot = gpu_->FirstRaisedErrorFlag(); slot >= 0) {
    return PredictorContext::DeviceError(*model_, slot);
  }
  for (std::size_t i = 0; i < plan.outputs.size(); ++i) {
    if (staged[i] != nullptr) {
      std::memcpy(response.outputs[i].data.data(), staged[i], response.outputs[i].data.size());
    }
  }
  return absl::OkStatus();
}

absl::Status Predictor::WarmUp(const std::atomic<bool>* cancel) {
  const ModelSignature& sig = model_->signature();
  // Some variable dim was made up, or a shape the graph reads from input values is.
  bool guessed = model_->graph().shapes_from_values();
  for (const TensorSpec& spec : sig.inputs) {
    if (spec.any_rank) {
      // No shape to make up; the first request checks the graph.
      manager_->Cap();
      return absl::OkStatus();
    }
    for (int64_t d : spec.dims) guessed = guessed || d == kAnyDim;
  }
  // Variable dims as 1 first (the cheapest run). A graph may refuse that on its shapes
  // alone: a strided conv's output concatenated with an upsampled one needs an even
  // height, so the second try gives every variable dim but the first (the batch) 64,
  // which strided CNNs and sequence models accept.
  absl::Status status = WarmUpWith(1, 1, cancel);
  if (guessed && status.code() == absl::StatusCode::kInvalidArgument) {
    status = WarmUpWith(1, 64, cancel);
    if (status.code() == absl::StatusCode::kInvalidArgument) {
      // Only made-up shapes were refused; the model may well serve the shapes its clients
      // send, so it loads, and the first request is its check.
      LOG(WARNING) << "model '" << model_->name() << "' version " << model_->version()
                   << ": warm-up skipped, the zero-filled inputs with made-up dims do not fit "
                      "the graph: "
                   << status.message();
      status = absl::OkStatus();
    }
  }
  NDS_RETURN_IF_ERROR(status);
  manager_->Cap();
  return absl::OkStatus();
}

absl::Status Predictor::WarmUpWith(int64_t first_dim, int64_t other_dims,
                                   const std::atomic<bool>* cancel) {
  const ModelSignature& sig = model_->signature();
  NDS_ASSIGN_OR_RETURN(
      std::shared_ptr<NDManager> ctx_manager,
      manager_->NewSubManager(ManagerLevel::kContext,
                              absl::StrCat("ctx/", manager_->name(), "/warmup")));
  PredictorContext ctx(*model_, kernels_, kernel_context_, gpu_.get(), std::move(ctx_manager),
                       pinned_);
  for (int i = 0; i < static_cast<int>(sig.inputs.size()); ++i) {
    std::vector<int64_t> shape = sig.inputs[i].dims;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == kAnyDim) shape[d] = d == 0 ? first_dim : other_dims;
    }
    NDS_RETURN_IF_ERROR(ctx.SetZeroInput(i, shape));
  }
  absl::Status status = ctx.Run(cancel);
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("warm-up with zero-filled inputs failed: ", status.message()));
  }
  std::vector<int> outputs(sig.outputs.size());
  for (int o = 0; o < static_cast<int>(outputs.size()); ++o) outputs[o] = o;
  NDS_RETURN_IF_ERROR(ctx.FetchOutputs(outputs).status());
  return ctx.Close();
}

absl::Status Predictor::Close() {
  absl::Status status;
  // The stream is idle between runs; the graphs' buffers go back before the manager
  // closes, and the handle that uses the workspace is destroyed right after.
  if (gpu_ != nullptr) gpu_->Synchronize().IgnoreError();
  graphs_.reset();
  if (manager_ != nullptr) status = manager_->Close();
  gpu_.reset();  // synchronizes its stream first
  return status;
}

}  // namespace ndserve::engine
