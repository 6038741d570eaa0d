#include "engine/predictor_context.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/predictor_context_util.h"
#include "engine/run_profile.h"
#include "kernels/node_attrs.h"
#include "kernels/shape_inference.h"

namespace ndserve::engine {

using predictor_context_internal::AtNode;
using predictor_context_internal::ViewOf;

PredictorContext::PredictorContext(const Model& model, absl::Span<const kernels::KernelFn> kernels,
                                   const kernels::KernelContext& kernel_context,
                                   kernels::GpuResources* gpu, std::shared_ptr<NDManager> manager,
                                   Pool* pinned)
    : model_(model),
      kernels_(kernels),
      gpu_(gpu),
      manager_(std::move(manager)),
      slots_(model.graph().values().size()),
      node_context_(kernel_context),
      host_context_(kernels::KernelContext::Cpu()),
      pinned_(gpu == nullptr ? nullptr : pinned),
      staging_(pinned_) {
  node_context_.scratch = this;
  host_context_.device = Device::Cpu();
  host_context_.scratch = this;
  scratch_manager_ = manager_.get();
  if (gpu_ == nullptr) host_manager_ = manager_;
  // With a flag slot per node the run needs no synchronization inside (GpuResources made
  // by a predictor has them; one made for a single kernel call may not).
  defer_errors_ =
      gpu_ != nullptr && gpu_->error_slots() >= static_cast<int>(model.graph().nodes().size());
  node_context_.defer_error_check = defer_errors_;
  // Parameters are read in place from the (capped) model manager: a slot only holds a
  // handle, nothing is attached to this context for them.
  const Graph& graph = model.graph();
  for (int v = 0; v < static_cast<int>(graph.values().size()); ++v) {
    const Value& value = graph.values()[v];
    if (value.source != ValueSource::kInitializer) continue;
    slots_[v].array = model.initializer(value.index);
    slots_[v].shape = graph.initializers()[value.index].shape;
  }
}

PredictorContext::~PredictorContext() {
  absl::Status status = Close();
  if (!status.ok()) LOG(ERROR) << "closing a predictor context: " << status;
}

absl::Status PredictorContext::SetInput(int input, absl::Span<const int64_t> shape,
                                        absl::Span<const uint8_t> bytes) {
  const int value = model_.graph().input_values()[input];
  const std::string& name = model_.graph().values()[value].name;
  const DType dtype = model_.graph().inputs()[input].dtype;
  NDArray array;
  if (gpu_ != nullptr) {
    // On the predictor's own stream: no wait for the whole device between uploads.
    NDS_ASSIGN_OR_RETURN(array, manager_->Create(shape, dtype, name));
    if (array.nbytes() != bytes.size()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' has ", bytes.size(),
                                                     " bytes, its shape needs ", array.nbytes()));
    }
    NDS_ASSIGN_OR_RETURN(void* data, array.Data());
    const void* src = bytes.data();
    if (pinned_ != nullptr) {
      // DMA from a pinned block: the copy is queued and the host moves on, where a
      // pageable source would make the driver stage it and block.
      NDS_ASSIGN_OR_RETURN(void* staged, staging_.Take(bytes.size()));
      if (!bytes.empty()) std::memcpy(staged, bytes.data(), bytes.size());
      src = staged;
    }
    queued_ = true;
    NDS_RETURN_IF_ERROR(gpu_->CopyToDevice(data, src, bytes.size()));
  } else {
    NDS_ASSIGN_OR_RETURN(array, manager_->FromHost(shape, dtype, bytes, name));
  }
  slots_[value] = Slot{std::move(array), kernels::Shape(shape.begin(), shape.end())};
  NotePeak();
  return absl::OkStatus();
}

absl::Status PredictorContext::SetZeroInput(int input, absl::Span<const int64_t> shape) {
  const int value = model_.graph().input_values()[input];
  const std::string& name = model_.graph().values()[value].name;
  const DType dtype = model_.graph().inputs()[input].dtype;
  NDArray array;
  if (gpu_ != nullptr) {
    // On the predictor's stream: Zeros would fill on the legacy default stream.
    NDS_ASSIGN_OR_RETURN(array, manager_->Create(shape, dtype, name));
    NDS_ASSIGN_OR_RETURN(void* data, array.Data());
    queued_ = true;
    NDS_RETURN_IF_ERROR(gpu_->FillZero(data, array.nbytes()));
  } else {
    NDS_ASSIGN_OR_RETURN(array, manager_->Zeros(shape, dtype, name));
  }
  slots_[value] = Slot{std::move(array), kernels::Shape(shape.begin(), shape.end())};
  NotePeak();
  return absl::OkStatus();
}

absl::StatusOr<void*> PredictorContext::Allocate(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(INT64_MAX)) {
    return absl::ResourceExhaustedError(absl::StrCat("scratch of ", bytes, " bytes"));
  }
  const int64_t n = static_cast<int64_t>(bytes);
  NDS_ASSIGN_OR_RETURN(NDArray block, scratch_manager_->Create(absl::MakeConstSpan(&n, 1),
                                                               DType::kUint8, "scratch"));
  NDS_ASSIGN_OR_RETURN(void* data, block.Data());
  NotePeak();
  // On a GPU a device block stays attached to the context manager until Close frees it;
  // host blocks are done with once the (synchronous) CPU kernel returned.
  if (gpu_ == nullptr || scratch_on_host_) {
    scratch_.push_back(std::move(block));
  } else if (!frames_.empty()) {
    NoteMade(block, current_scope_);  // a loop frees it with its iteration
  }
  return data;
}

void PredictorContext::ReleaseScratch() {
  for (const NDArray& block : scratch_) NDManager::UnsafeFree(block).IgnoreError();
  scratch_.clear();
}

absl::Status PredictorContext::EnsureHostManager() {
  if (host_manager_ != nullptr) return absl::OkStatus();
  NDS_ASSIGN_OR_RETURN(host_manager_,
                       model_.memory()->NewBaseManager(Device::Cpu(), ManagerLevel::kContext,
                                                       absl::StrCat(manager_->name(), "/host")));
  return absl::OkStatus();
}

absl::StatusOr<kernels::TensorView> PredictorContext::HostView(int value, bool shape_only) {
  const Graph& graph = model_.graph();
  const Slot& slot = slots_[value];
  if (shape_only) {
    // Shape and Size read no data (kOpReadsShapes): the tensor may stay on the device.
    kernels::TensorView view;
    view.dtype = graph.values()[value].source == ValueSource::kInitializer
                     ? graph.initializers()[graph.values()[value].index].dtype
                     : slot.array.dtype();
    view.shape = slot.shape;
    view.device = Device::Cpu();
    if (slot.array.is_null() && graph.values()[value].source != ValueSource::kInitializer) {
      return absl::InternalError(
          absl::StrCat("value '", graph.values()[value].name, "' was never computed"));
    }
    return view;
  }
  if (gpu_ != nullptr && graph.values()[value].source == ValueSource::kInitializer) {
    // The graph kept the host bytes of every initializer a host node reads.
    const Initializer& init = graph.initializers()[graph.values()[value].index];
    kernels::TensorView view;
    view.data = const_cast<char*>(init.bytes.data());
    view.dtype = init.dtype;
    view.shape = init.shape;
    view.device = Device::Cpu();
    return view;
  }
  if (gpu_ != nullptr && !slot.host) {
    return absl::InternalError(absl::StrCat("value '", graph.values()[value].name,
                                            "' is on the device but a host node reads it"));
  }
  return View(value);
}

absl::StatusOr<kernels::TensorView> PredictorContext::DeviceView(int value) {
  Slot& slot = slots_[value];
  if (!slot.host) return View(value);
  if (!slot.uploaded.valid()) {
    NDS_ASSIGN_OR_RETURN(slot.uploaded, manager_->Create(slot.shape, slot.array.dtype(),
                                                         model_.graph().values()[value].name));
    NoteMade(slot.uploaded, ScopeOf(value));
    NDS_ASSIGN_OR_RETURN(void* dst, slot.uploaded.Data());
    NDS_ASSIGN_OR_RETURN(void* src, slot.array.Data());
    // The host buffer stays until Close, which waits for the stream first.
    queued_ = true;
    NDS_RETURN_IF_ERROR(gpu_->CopyToDevice(dst, src, slot.array.nbytes()));
    NotePeak();
  }
  return ViewOf(slot.uploaded, slot.shape);
}

absl::StatusOr<kernels::TensorView> PredictorContext::View(int value) const {
  const Slot& slot = slots_[value];
  if (slot.array.is_null()) {
    return absl::InternalError(
        absl::StrCat("value '", model_.graph().values()[value].name, "' was never computed"));
  }
  return ViewOf(slot.array, slot.shape);
}

void PredictorContext::NotePeak() {
  uint64_t bytes = manager_->bytes();
  if (host_manager_ != nullptr && host_manager_ != manager_) bytes += host_manager_->bytes();
  peak_bytes_ = std::max(peak_bytes_, bytes);
}

absl::StatusOr<kernels::OpAttrs> PredictorContext::RequestAttrs(const Node& node) {
  std::vector<std::optional<kernels::HostValue>> values = node.host_values;
  for (const auto& [pos, value] : node.dynamic_host_inputs) {
    const Slot& slot = slots_[value];
    if (gpu_ != nullptr && !slot.host &&
        model_.graph().values()[value].source != ValueSource::kInitializer) {
      // Computed from data on the device: the run waits for it here (such a graph is
      // never captured, has_dynamic_attrs).
      if (slot.array.is_null()) {
        return absl::InternalError(absl::StrCat(
            "value '", model_.graph().values()[value].name, "' was never computed"));
      }
      std::vector<uint8_t> bytes(slot.array.nbytes());
      NDS_ASSIGN_OR_RETURN(void* data, slot.array.Data());
      if (!bytes.empty()) {
        NDS_RETURN_IF_ERROR(gpu_->CopyToHost(bytes.data(), data, bytes.size()));
        NDS_RETURN_IF_ERROR(gpu_->Synchronize());
      }
      NDS_ASSIGN_OR_RETURN(values[pos], kernels::HostValue::FromBytes(
                                            slot.array.dtype(), slot.shape,
                                            absl::MakeConstSpan(bytes)));
      continue;
    }
    NDS_ASSIGN_OR_RETURN(kernels::TensorView view, HostView(value, /*shape_only=*/false));
    NDS_ASSIGN_OR_RETURN(
        values[pos],
        kernels::HostValue::FromBytes(
            view.dtype, view.shape,
            absl::MakeConstSpan(static_cast<const uint8_t*>(view.data), view.nbytes())));
  }
  return kernels::BuildOpAttrs(node.op, model_.graph().opset(), node.attr_map,
                               kernels::HostInputs(std::move(values)));
}

absl::StatusOr<bool> PredictorContext::Condition(int value) {
  if (auto it = conditions_.find(value); it != conditions_.end()) return it->second;
  NDS_ASSIGN_OR_RETURN(const int64_t v, HostScalar(value, DType::kBool, "condition"));
  conditions_[value] = v != 0;
  return v != 0;
}

absl::StatusOr<bool> PredictorContext::GuardsHold(const Node& node) {
  for (const auto& [cond, taken] : node.guards) {
    NDS_ASSIGN_OR_RETURN(const bool value, Condition(cond));
    if (value != taken) return false;
  }
  return true;
}

absl::Status PredictorContext::RunIf(const Node& node) {
  NDS_ASSIGN_OR_RETURN(const bool cond, Condition(node.inputs[0]));
  const std::size_t k = node.outputs.size();
  for (std::size_t j = 0; j < k; ++j) {
    if (node.outputs[j] == kNoValue) continue;
    const int picked = node.inputs[cond ? 1 + j : 1 + k + j];
    if (slots_[picked].array.is_null()) {
      return absl::InternalError(absl::StrCat("the ", cond ? "then" : "else", " branch's value '",
                                              model_.graph().values()[picked].name,
                                              "' was never computed"));
    }
    slots_[node.outputs[j]] = slots_[picked];
  }
  return absl::OkStatus();
}

absl::Status PredictorContext::RunNode(int n) {
  const Graph& graph = model_.graph();
  const Node& node = graph.nodes()[n];
  if (node.op == kernels::OpKind::kIf) return RunIf(node);
  if (node.op == kernels::OpKind::kLoop) return RunLoop(n);
  current_scope_ = node.loop;
  const bool on_host = node.on_host;
  if (on_host && gpu_ != nullptr) NDS_RETURN_IF_ERROR(EnsureHostManager());
  std::optional<kernels::OpAttrs> request_attrs;
  if (node.has_dynamic_attrs()) {
    NDS_ASSIGN_OR_RETURN(request_attrs, RequestAttrs(node));
  }
  const kernels::OpAttrs& attrs = request_attrs.has_value() ? *request_attrs : node.attrs;
  const bool shape_only = kernels::GetOpInfo(node.op).reads_shapes_only;
  absl::InlinedVector<kernels::TensorView, 4> inputs;
  absl::InlinedVector<kernels::TensorDesc, 4> descs;
  for (int in : node.inputs) {
    kernels::TensorView view;
    if (on_host) {
      NDS_ASSIGN_OR_RETURN(view, HostView(in, shape_only));
    } else {
      NDS_ASSIGN_OR_RETURN(view, DeviceView(in));
    }
    descs.push_back(view.desc());
    inputs.push_back(std::move(view));
  }
  NDS_ASSIGN_OR_RETURN(std::vector<kernels::TensorDesc> inferred,
                       kernels::InferOutputs(node.op, descs, attrs));
  if (inferred.size() < node.outputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the node has ", node.outputs.size(),
                                                   " outputs, the op at most ", inferred.size()));
  }
  const bool host_memory = on_host && gpu_ != nullptr;
  if (IsShapeOnlyOp(node.op)) {
    // Same bytes, new shape: no kernel call and no new buffer.
    const Slot& src = slots_[node.inputs[0]];
    if (on_host || !src.host) {
      slots_[node.outputs[0]] = Slot{src.array, std::move(inferred[0].shape), src.host};
    } else {
      // A device node reading a host value: alias its uploaded copy.
      NDS_RETURN_IF_ERROR(DeviceView(node.inputs[0]).status());
      slots_[node.outputs[0]] = Slot{slots_[node.inputs[0]].uploaded, std::move(inferred[0].shape)};
    }
    return absl::OkStatus();
  }
  NDManager& out_manager = on_host ? *host_manager_ : *manager_;
  absl::InlinedVector<kernels::TensorView, 3> outputs;
  absl::InlinedVector<NDArray, 3> ignored;  // outputs the graph does not read
  // Creates output j with `shape` in out_manager and gives it its slot.
  auto make_output = [&](int j, kernels::ShapeSpan shape) -> absl::StatusOr<kernels::TensorView> {
    const int value = node.outputs[j];
    NDS_ASSIGN_OR_RETURN(
        NDArray array,
        out_manager.Create(shape, inferred[j].dtype,
                           value == kNoValue ? absl::string_view() : graph.values()[value].name));
    NDS_ASSIGN_OR_RETURN(kernels::TensorView view, ViewOf(array, shape));
    output_bytes_ += array.nbytes();
    NoteMade(array, node.loop);
    if (value == kNoValue) {
      ignored.push_back(std::move(array));
    } else {
      slots_[value] = Slot{std::move(array), kernels::Shape(shape.begin(), shape.end()), host_memory};
    }
    return view;
  };
  const bool data_shape = kernels::GetOpInfo(node.op).data_shape;
  // kOpDataShape ops (NonZero, NonMaxSuppression) ask for their outputs once the kernel
  // knows their dims.
  struct LateOutputs : kernels::OutputAllocator {
    explicit LateOutputs(decltype(make_output)& m) : make(m) {}
    absl::StatusOr<kernels::TensorView> Allocate(int index, kernels::ShapeSpan shape) override {
      made.push_back(index);
      return make(index, shape);
    }
    decltype(make_output)& make;
    absl::InlinedVector<int, 2> made;
  } late(make_output);
  if (!data_shape) {
    for (int j = 0; j < static_cast<int>(node.outputs.size()); ++j) {
      NDS_ASSIGN_OR_RETURN(kernels::TensorView view, make_output(j, inferred[j].shape));
      outputs.push_back(std::move(view));
    }
  }
  NotePeak();
  scratch_manager_ = on_host ? host_manager_.get() : manager_.get();
  scratch_on_host_ = on_host;
  kernels::KernelContext ctx = on_host ? host_context_ : node_context_;
  if (!on_host) ctx.packed_weight = model_.packed_weight(n);
  if (defer_errors_ && !on_host) ctx.error_flag = gpu_->error_flag(n);
  if (data_shape) ctx.outputs = &late;
  absl::Status ran = kernels_[n](ctx, inputs, outputs, attrs);
  ReleaseScratch();
  NDS_RETURN_IF_ERROR(ran);
  if (data_shape) {
    NotePeak();
    for (int j = 0; j < static_cast<int>(node.outputs.size()); ++j) {
      if (absl::c_find(late.made, j) == late.made.end()) {
        return absl::InternalError(absl::StrCat("the kernel made no output ", j));
      }
    }
  }
  if (gpu_ == nullptr || on_host) {
    for (const NDArray& a : ignored) NDManager::UnsafeFree(a).IgnoreError();
  }
  return absl::OkStatus();
}

absl::Status PredictorContext::Run(const std::atomic<bool>* cancel) {
  const Graph& graph = model_.graph();
  const bool release_early = gpu_ == nullptr;
  const int nodes = static_cast<int>(graph.nodes().size());
  cancel_ = cancel;
  if (gpu_ != nullptr) {
    // Nothing queued can write a flag: the previous run synchronized before it returned
    // (only this run's input copies are queued).
    if (defer_errors_) gpu_->ClearErrorFlags();
    queued_ = true;
  }
  // Null unless a benchmark asked for a per-node profile (run_profile.h).
  RunProfile* const profile = ActiveRunProfile();
  const absl::Time run_start = profile != nullptr ? absl::Now() : absl::InfinitePast();
  for (int n = 0; n < nodes; ++n) {
    // A loop body's nodes run from their Loop, which releases what they read last.
    if (graph.nodes()[n].loop != kNoValue) continue;
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      return absl::CancelledError(absl::StrCat("request cancelled before node '",
                                               graph.nodes()[n].name, "' (", n, " of ", nodes,
                                               " nodes run)"));
    }
    bool run = true;
    if (!graph.nodes()[n].guards.empty()) {
      absl::StatusOr<bool> holds = GuardsHold(graph.nodes()[n]);
      NDS_RETURN_IF_ERROR(AtNode(holds.status(), graph.nodes()[n]));
      run = *holds;
    }
    if (!run) {
      // A branch not taken: its values stay uncomputed, and what it would have been the
      // last to read is released below all the same.
    } else if (profile != nullptr) {
      NDS_RETURN_IF_ERROR(AtNode(RunNodeProfiled(n, *profile), graph.nodes()[n]));
    } else {
      NDS_RETURN_IF_ERROR(AtNode(RunNode(n), graph.nodes()[n]));
    }
    if (release_early) {
      for (int s : graph.ReleasedAfter(n)) {
        if (slots_[s].array.valid()) NDManager::UnsafeFree(slots_[s].array).IgnoreError();
      }
    }
  }
  if (profile != nullptr) profile->RecordRun(absl::ToDoubleSeconds(absl::Now() - run_start));
  return absl::OkStatus();
}

absl::Status PredictorContext::RunNodeProfiled(int n, RunProfile& profile) {
  const Node& node = model_.graph().nodes()[n];
  const absl::Time start = absl::Now();
  NDS_RETURN_IF_ERROR(RunNode(n));
  // On a GPU this times the queueing, not the kernels: profile CPU models.
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  absl::InlinedVector<kernels::ShapeSpan, 4> in, out;
  for (int v : node.inputs) in.push_back(v == kNoValue ? kernels::ShapeSpan() : slots_[v].shape);
  for (int v : node.outputs) out.push_back(v == kNoValue ? kernels::ShapeSpan() : slots_[v].shape);
  profile.RecordNode(node, in, out, seconds);
  return absl::OkStatus();
}

absl::Status PredictorContext::DeviceError(const Model& model, int slot) {
  const Node& node = model.graph().nodes()[slot];
  return absl::InvalidArgumentError(absl::StrCat(
      "node '", node.name, "' (", kernels::OpKindName(node.op), "): ", kernels::OpKindName(node.op),
      node.op == kernels::OpKind::kScatterND || node.op == kernels::OpKind::kScatterElements
          ? ": an index is out of range (its update dropped)"
          : ": an index is out of range (elements read as zeros)"));
}

absl::StatusOr<std::vector<InferOutputTensor>> PredictorContext::FetchOutputs(
    absl::Span<const int> outputs) {
  const Graph& graph = model_.graph();
  std::vector<InferOutputTensor> result(outputs.size());
  // Pinned blocks the D2H copies land in, copied into the reply after the sync.
  absl::InlinedVector<const void*, 4> staged(outputs.size(), nullptr);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const int output = outputs[i];
    const int value = graph.output_values()[output];
    const Slot& slot = slots_[value];
    if (slot.array.is_null()) {
      return absl::InternalError(
          absl::StrCat("output '", graph.outputs()[output].name, "' was never computed"));
    }
    InferOutputTensor& out = result[i];
    out.name = graph.outputs()[output].name;
    out.dtype = slot.array.dtype();
    out.shape.assign(slot.shape.begin(), slot.shape.end());
    out.data.resize(slot.array.nbytes());
    if (gpu_ != nullptr && !slot.host) {
      NDS_ASSIGN_OR_RETURN(void* data, slot.array.Data());
      void* dst = out.data.data();
      if (pinned_ != nullptr) {
        NDS_ASSIGN_OR_RETURN(dst, staging_.Take(out.data.size()));
        staged[i] = dst;
      }
      queued_ = true;
      NDS_RETURN_IF_ERROR(gpu_->CopyToHost(dst, data, out.data.size()));
    } else {
      NDS_RETURN_IF_ERROR(slot.array.CopyToHost(absl::MakeSpan(out.data)));
    }
  }
  if (gpu_ == nullptr) return result;
  // The run's one synchronization: the kernels, the copies back, and the error flags.
  queued_ = false;
  NDS_RETURN_IF_ERROR(gpu_->Synchronize());
  if (defer_errors_) {
    if (int slot = gpu_->FirstRaisedErrorFlag(); slot >= 0) return DeviceError(model_, slot);
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (staged[i] != nullptr) std::memcpy(result[i].data.data(), staged[i], result[i].data.size());
  }
  staging_.Release();
  return result;
}

absl::StatusOr<InferOutputTensor> PredictorContext::CopyOutput(int output) {
  NDS_ASSIGN_OR_RETURN(std::vector<InferOutputTensor> out,
                       FetchOutputs(absl::MakeConstSpan(&output, 1)));
  return std::move(out[0]);
}

absl::StatusOr<PredictorContext::DeviceBuffer> PredictorContext::BufferOf(
    int value, absl::string_view what) const {
  const Slot& slot = slots_[value];
  if (slot.array.is_null() || slot.host) {
    return absl::FailedPreconditionError(absl::StrCat(what, " has no device buffer"));
  }
  NDS_ASSIGN_OR_RETURN(void* data, slot.array.Data());
  return DeviceBuffer{data, slot.array.nbytes(), slot.array.dtype(),
                      std::vector<int64_t>(slot.shape.begin(), slot.shape.end())};
}

absl::StatusOr<PredictorContext::DeviceBuffer> PredictorContext::InputBuffer(int input) const {
  const int value = model_.graph().input_values()[input];
  return BufferOf(value, absl::StrCat("input '", model_.graph().values()[value].name, "'"));
}

absl::StatusOr<PredictorContext::DeviceBuffer> PredictorContext::OutputBuffer(int output) const {
  return BufferOf(model_.graph().output_values()[output],
                  absl::StrCat("output '", model_.graph().outputs()[output].name, "'"));
}

absl::Status PredictorContext::Detach() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  queued_ = false;
  staging_.Release();
  slots_.clear();
  scratch_.clear();
  if (host_manager_ != nullptr && host_manager_ != manager_) return host_manager_->Close();
  return absl::OkStatus();
}

absl::Status PredictorContext::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  absl::Status status;
  // The pool is not stream-ordered: nothing may go back to it while a kernel can still
  // read or write it (or an upload still read a host buffer).
  if (gpu_ != nullptr && queued_) status = gpu_->Synchronize();
  queued_ = false;
  staging_.Release();
  // Drop the handles first so that nothing of this request is referenced afterwards.
  slots_.clear();
  scratch_.clear();
  absl::Status closed = manager_->Close();
  if (status.ok()) status = closed;
  if (host_manager_ != nullptr && host_manager_ != manager_) {
    closed = host_manager_->Close();
    if (status.ok()) status = closed;
  }
  return status;
}

}  // namespace ndserve::engine
