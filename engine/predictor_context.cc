#include "engine/predictor_context.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "kernels/shape_inference.h"
#include "memory/device_copy.h"

namespace ndserve::engine {
namespace {

absl::Status AtNode(const absl::Status& status, const Node& node) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("node '", node.name, "' (", kernels::OpKindName(node.op),
                                   "): ", status.message()));
}

}  // namespace

PredictorContext::PredictorContext(const Model& model, absl::Span<const kernels::KernelFn> kernels,
                                   const kernels::KernelContext& kernel_context,
                                   kernels::GpuResources* gpu, std::shared_ptr<NDManager> manager)
    : model_(model),
      kernels_(kernels),
      gpu_(gpu),
      manager_(std::move(manager)),
      slots_(model.graph().values().size()),
      node_context_(kernel_context) {
  node_context_.scratch = this;
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
    NDS_RETURN_IF_ERROR(CopyHostToDeviceOnStream(array.device(), data, bytes.data(), bytes.size(),
                                                 gpu_->context().cuda_stream));
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
  NDS_ASSIGN_OR_RETURN(NDArray array,
                       manager_->Zeros(shape, model_.graph().inputs()[input].dtype, name));
  slots_[value] = Slot{std::move(array), kernels::Shape(shape.begin(), shape.end())};
  NotePeak();
  return absl::OkStatus();
}

absl::StatusOr<kernels::TensorView> PredictorContext::View(int value) const {
  const Slot& slot = slots_[value];
  kernels::TensorView view;
  if (slot.array.is_null()) {
    return absl::InternalError(
        absl::StrCat("value '", model_.graph().values()[value].name, "' was never computed"));
  }
  NDS_ASSIGN_OR_RETURN(view.data, slot.array.Data());
  view.dtype = slot.array.dtype();
  view.shape = slot.shape;
  view.device = slot.array.device();
  return view;
}

absl::StatusOr<void*> PredictorContext::Allocate(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(INT64_MAX)) {
    return absl::ResourceExhaustedError(absl::StrCat("scratch of ", bytes, " bytes"));
  }
  const int64_t n = static_cast<int64_t>(bytes);
  NDS_ASSIGN_OR_RETURN(NDArray block,
                       manager_->Create(absl::MakeConstSpan(&n, 1), DType::kUint8, "scratch"));
  NDS_ASSIGN_OR_RETURN(void* data, block.Data());
  NotePeak();
  // On a GPU the block stays attached to the context manager until Close frees it.
  if (gpu_ == nullptr) scratch_.push_back(std::move(block));
  return data;
}

void PredictorContext::ReleaseScratch() {
  for (const NDArray& block : scratch_) NDManager::UnsafeFree(block).IgnoreError();
  scratch_.clear();
}

void PredictorContext::NotePeak() { peak_bytes_ = std::max(peak_bytes_, manager_->bytes()); }

absl::Status PredictorContext::Run() {
  const Graph& graph = model_.graph();
  const bool release_early = gpu_ == nullptr;
  absl::InlinedVector<kernels::TensorView, 4> inputs;
  absl::InlinedVector<kernels::TensorView, 3> outputs;
  absl::InlinedVector<kernels::TensorDesc, 4> descs;
  absl::InlinedVector<NDArray, 3> ignored;  // outputs the graph does not read
  for (int n = 0; n < static_cast<int>(graph.nodes().size()); ++n) {
    const Node& node = graph.nodes()[n];
    inputs.clear();
    descs.clear();
    for (int in : node.inputs) {
      absl::StatusOr<kernels::TensorView> view = View(in);
      if (!view.ok()) return AtNode(view.status(), node);
      descs.push_back(view->desc());
      inputs.push_back(*std::move(view));
    }
    absl::StatusOr<std::vector<kernels::TensorDesc>> inferred =
        kernels::InferOutputs(node.op, descs, node.attrs);
    if (!inferred.ok()) return AtNode(inferred.status(), node);
    if (inferred->size() < node.outputs.size()) {
      return AtNode(
          absl::InvalidArgumentError(absl::StrCat("the node has ", node.outputs.size(),
                                                  " outputs, the op at most ", inferred->size())),
          node);
    }
    if (IsShapeOnlyOp(node.op)) {
      // Same bytes, new shape: no kernel call and no new buffer.
      slots_[node.outputs[0]] = Slot{slots_[node.inputs[0]].array, std::move((*inferred)[0].shape)};
    } else {
      outputs.clear();
      ignored.clear();
      for (int j = 0; j < static_cast<int>(node.outputs.size()); ++j) {
        const kernels::TensorDesc& desc = (*inferred)[j];
        const int value = node.outputs[j];
        absl::StatusOr<NDArray> array =
            manager_->Create(desc.shape, desc.dtype,
                             value == kNoValue ? absl::string_view() : graph.values()[value].name);
        if (!array.ok()) return AtNode(array.status(), node);
        kernels::TensorView view;
        NDS_ASSIGN_OR_RETURN(view.data, array->Data());
        view.dtype = desc.dtype;
        view.shape = desc.shape;
        view.device = array->device();
        outputs.push_back(std::move(view));
        if (value == kNoValue) {
          ignored.push_back(*std::move(array));
        } else {
          slots_[value] = Slot{*std::move(array), desc.shape};
        }
      }
      NotePeak();
      absl::Status ran = kernels_[n](node_context_, inputs, outputs, node.attrs);
      ReleaseScratch();
      NDS_RETURN_IF_ERROR(AtNode(ran, node));
      if (release_early) {
        for (const NDArray& a : ignored) NDManager::UnsafeFree(a).IgnoreError();
      }
    }
    if (release_early) {
      for (int s : graph.ReleasedAfter(n)) {
        if (slots_[s].array.valid()) NDManager::UnsafeFree(slots_[s].array).IgnoreError();
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<InferOutputTensor> PredictorContext::CopyOutput(int output) const {
  const Graph& graph = model_.graph();
  const int value = graph.output_values()[output];
  const Slot& slot = slots_[value];
  InferOutputTensor out;
  out.name = graph.outputs()[output].name;
  out.dtype = slot.array.dtype();
  out.shape.assign(slot.shape.begin(), slot.shape.end());
  out.data.resize(slot.array.nbytes());
  if (gpu_ != nullptr) {
    // Ordered after this request's kernels on its stream, and back when it returns.
    NDS_ASSIGN_OR_RETURN(void* data, slot.array.Data());
    NDS_RETURN_IF_ERROR(CopyDeviceToHostOnStream(slot.array.device(), out.data.data(), data,
                                                 out.data.size(), gpu_->context().cuda_stream));
  } else {
    NDS_RETURN_IF_ERROR(slot.array.CopyToHost(absl::MakeSpan(out.data)));
  }
  return out;
}

absl::Status PredictorContext::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  absl::Status status;
  // The pool is not stream-ordered: nothing may go back to it while a kernel can still
  // read or write it.
  if (gpu_ != nullptr) status = gpu_->Synchronize();
  // Drop the handles first so that nothing of this request is referenced afterwards.
  slots_.clear();
  scratch_.clear();
  absl::Status closed = manager_->Close();
  if (status.ok()) status = closed;
  return status;
}

}  // namespace ndserve::engine
