#include "train/training_run.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/onnx_loader.h"
#include "kernels/attrs/rnn.h"
#include "kernels/op_kind.h"
#include "memory/device_copy.h"
#include "memory/dtype.h"
#include "train/array_helpers.h"
#include "train/compute.h"
#include "train/losses.h"
#include "train/variable.h"

namespace ndserve::train {
namespace {

// Adds the sum of squares of one parameter's gradient into `total` (one float on the
// step's device). Row-updated gradients (embedding tables) are zero outside the rows
// written since the last ClearGrad, so only those are read, each once.
absl::Status AddGradSquares(const Variable& parameter, const NDArray& total) {
  const NDArray& grad = parameter.grad();
  VariableState* state = parameter.state();
  NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&grad, &total}));
  NDS_ASSIGN_OR_RETURN(const float* data, grad.DataAs<float>());
  NDS_ASSIGN_OR_RETURN(float* out, total.DataAs<float>());
  const kernels::KernelContext& ctx = CurrentContext();
  if (!state->dense_grad && grad.rank() >= 1 && grad.shape()[0] > 0) {
    const std::vector<std::int64_t>& rows = DistinctTouchedRows(*state);
    return math->sum_squares_rows(ctx, data, rows.data(), static_cast<std::int64_t>(rows.size()),
                                  RowWidth(grad), out, true);
  }
  return math->sum_squares(ctx, data, grad.num_elements(), out, true);
}

// A client's tensor in the step's scope, copied on the run's stream (train/compute.h),
// so the step's kernels, queued after it on that stream, see the bytes.
absl::StatusOr<NDArray> Upload(NDManager& batch, const engine::HostTensor& t,
                               absl::string_view role) {
  absl::StatusOr<NDArray> array = batch.Create(t.shape, t.dtype, t.name);
  absl::Status copied = array.status();
  if (array.ok()) {
    if (t.bytes.size() != array->nbytes()) {
      copied = absl::InvalidArgumentError(absl::StrCat(
          t.bytes.size(), " bytes for ", array->DebugString(), ", which holds ", array->nbytes()));
    } else {
      absl::StatusOr<void*> dst = array->Data();
      copied = dst.ok() ? CopyHostToDeviceOnStream(array->device(), *dst, t.bytes.data(),
                                                    t.bytes.size(),
                                                    CurrentContext().cuda_stream)
                        : dst.status();
    }
  }
  if (!copied.ok() && absl::IsInvalidArgument(copied)) {
    return absl::InvalidArgumentError(absl::StrCat(role, " '", t.name, "': ", copied.message()));
  }
  NDS_RETURN_IF_ERROR(copied);
  return array;
}

}  // namespace

absl::StatusOr<LossKind> ParseLossKind(absl::string_view name) {
  if (name == "cross_entropy") return LossKind::kCrossEntropy;
  if (name == "bce_with_logits") return LossKind::kBceWithLogits;
  if (name == "mse") return LossKind::kMse;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown loss '", name, "' (cross_entropy, bce_with_logits or mse)"));
}

absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "momentum") return OptimizerKind::kMomentum;
  if (name == "adam") return OptimizerKind::kAdam;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", name, "' (sgd, momentum or adam)"));
}

absl::StatusOr<std::unique_ptr<TrainingRun>> TrainingRun::Create(
    const std::string& model_path, std::shared_ptr<engine::TrainerScope> scope,
    TrainingRunOptions options) {
  if (scope == nullptr) return absl::InvalidArgumentError("a training run needs a trainer scope");
  if (!(options.lr > 0.0f) || !std::isfinite(options.lr)) {
    return absl::InvalidArgumentError(absl::StrCat("lr must be a positive number, not ", options.lr));
  }
  if (options.truncated_bptt_steps < 0) {
    return absl::InvalidArgumentError("truncated_bptt_steps must not be negative");
  }
  NDS_ASSIGN_OR_RETURN(engine::GraphDef def, engine::ReadOnnxGraphDef(model_path));
  NDS_ASSIGN_OR_RETURN(engine::Graph built, engine::Graph::Build(std::move(def)));
  auto graph = std::make_unique<engine::Graph>(std::move(built));
  if (options.target_output.empty()) {
    if (graph->outputs().empty()) return absl::InvalidArgumentError("the model has no outputs");
    options.target_output = graph->outputs()[0].name;
  } else if (graph->FindValue(options.target_output) == engine::kNoValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("target output '", options.target_output, "' is no value of the model"));
  }
  std::unique_ptr<TrainingRun> run(new TrainingRun(std::move(graph), scope, std::move(options)));
  NDS_RETURN_IF_ERROR(run->SetUpDevice());
  if (run->options_.truncated_bptt_steps > 0) {
    absl::Status carried = run->SetUpCarriedState();
    if (!carried.ok()) {
      return absl::Status(carried.code(),
                          absl::StrCat("truncated_bptt_steps ", run->options_.truncated_bptt_steps,
                                       " needs a recurrent model: ", carried.message()));
    }
  }
  NDManager& trainer = *run->scope_->manager();
  NDS_ASSIGN_OR_RETURN(RecordedGraph recorded,
                       RecordedGraph::Create(*run->graph_, run->options_.trainable, trainer));
  run->recorded_ = std::make_unique<RecordedGraph>(std::move(recorded));
  if (run->recorded_->parameters().empty()) {
    return absl::InvalidArgumentError("the model has no FP32 initializer to train");
  }
  std::vector<Variable> parameters = run->recorded_->parameters();
  switch (run->options_.optimizer) {
    case OptimizerKind::kSgd:
    case OptimizerKind::kMomentum: {
      SgdOptions sgd;
      sgd.lr = run->options_.lr;
      sgd.momentum =
          run->options_.optimizer == OptimizerKind::kMomentum ? run->options_.momentum : 0.0f;
      NDS_ASSIGN_OR_RETURN(run->optimizer_, Sgd::Create(std::move(parameters), sgd, trainer));
      break;
    }
    case OptimizerKind::kAdam: {
      AdamOptions adam;
      adam.lr = run->options_.lr;
      NDS_ASSIGN_OR_RETURN(run->optimizer_, Adam::Create(std::move(parameters), adam, trainer));
      break;
    }
  }
  return run;
}

absl::Status TrainingRun::SetUpDevice() {
  const Device device = scope_->manager()->device();
  if (!device.is_cuda()) return absl::OkStatus();
  NDS_ASSIGN_OR_RETURN(gpu_, kernels::GpuResources::Create(device));
  // cuBLAS's working space comes from the trainer scope's pool, like a predictor's, so
  // cuBLAS allocates nothing of its own; made now, between steps, while the trainer
  // scope takes arrays. Exact FP32 products: the updates are compared with PyTorch's.
  constexpr std::int64_t kWorkspaceBytes = 4 << 20;
  NDS_ASSIGN_OR_RETURN(NDArray workspace,
                       scope_->manager()->Create(absl::MakeConstSpan(&kWorkspaceBytes, 1),
                                                 DType::kUint8, "cublas_workspace"));
  NDS_ASSIGN_OR_RETURN(void* ptr, workspace.Data());
  NDS_RETURN_IF_ERROR(gpu_->SetCublasWorkspace(ptr, static_cast<std::size_t>(kWorkspaceBytes)));
  NDS_RETURN_IF_ERROR(gpu_->SetTf32(false));
  context_ = gpu_->context();
  // A Gather on a bad id raises the flag without a synchronization of its own; the step
  // reads it once, after backward, before it updates anything.
  context_.defer_error_check = true;
  return absl::OkStatus();
}

absl::Status TrainingRun::Synchronize() {
  return gpu_ != nullptr ? gpu_->Synchronize() : absl::OkStatus();
}

absl::Status TrainingRun::CheckDeviceErrors() {
  if (gpu_ == nullptr || gpu_->FirstRaisedErrorFlag() < 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "an id or label of the batch is out of range (found on ", context_.device.ToString(),
      "); the parameters were not updated"));
}

absl::Status TrainingRun::SetUpCarriedState() {
  const engine::Graph& g = *graph_;
  const engine::Node* lstm = nullptr;
  for (const engine::Node& node : g.nodes()) {
    if (node.op != kernels::OpKind::kLSTM) continue;
    if (lstm != nullptr) return absl::InvalidArgumentError("it has more than one LSTM");
    lstm = &node;
  }
  if (lstm == nullptr) return absl::InvalidArgumentError("it has no LSTM whose state to carry");
  const auto* attrs = std::get_if<kernels::RecurrentAttrs>(&lstm->attrs);
  if (attrs == nullptr) return absl::InternalError("the LSTM node has no recurrent attributes");
  const auto slots = attrs->Slots(lstm->inputs.size());
  // X, initial_h, initial_c in ONNX's input order; Y_h, Y_c are outputs 1 and 2.
  const int x_slot = slots[0];
  const int state_slots[2] = {slots[5], slots[6]};
  std::vector<std::vector<std::int64_t>> shapes;
  for (int k = 0; k < 2; ++k) {
    const int value = state_slots[k] >= 0 ? lstm->inputs[static_cast<std::size_t>(state_slots[k])]
                                          : engine::kNoValue;
    const engine::Value* v =
        value == engine::kNoValue ? nullptr : &g.values()[static_cast<std::size_t>(value)];
    if (v == nullptr || v->source != engine::ValueSource::kInput) {
      return absl::InvalidArgumentError(
          absl::StrCat("LSTM '", lstm->name, "' must take its initial_", k == 0 ? "h" : "c",
                       " from a model input, which the session feeds with the carried state"));
    }
    const engine::TensorSpec& spec = g.inputs()[static_cast<std::size_t>(v->index)];
    if (spec.any_rank || spec.dtype != DType::kFp32 ||
        std::any_of(spec.dims.begin(), spec.dims.end(), [](std::int64_t d) { return d <= 0; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("the carried state input ", spec.ToString(), " needs a fixed FP32 shape"));
    }
    carried_inputs_[k] = v->index;
    shapes.push_back(spec.dims);
    const std::size_t out = static_cast<std::size_t>(k) + 1;
    if (lstm->outputs.size() <= out || lstm->outputs[out] == engine::kNoValue) {
      return absl::InvalidArgumentError(absl::StrCat("LSTM '", lstm->name, "' has no Y_",
                                                     k == 0 ? "h" : "c", " output to carry"));
    }
    carried_outputs_[k] = g.values()[static_cast<std::size_t>(lstm->outputs[out])].name;
  }
  if (x_slot >= 0) {
    const engine::Value& x =
        g.values()[static_cast<std::size_t>(lstm->inputs[static_cast<std::size_t>(x_slot)])];
    if (x.source == engine::ValueSource::kInput) sequence_input_ = x.index;
  }
  // Made now, between steps: the trainer scope is capped during them.
  NDS_ASSIGN_OR_RETURN(CarriedState carried, CarriedState::Create(*scope_->manager(), shapes));
  carried_.emplace(std::move(carried));
  return absl::OkStatus();
}

template <typename Fill>
absl::StatusOr<StepResult> TrainingRun::StepWith(Fill fill) {
  NDS_ASSIGN_OR_RETURN(engine::TrainingStep step, scope_->BeginStep());
  // Every op of the step runs on the run's device (train/compute.h).
  const ComputeScope compute(context_);
  if (gpu_ != nullptr) gpu_->ClearErrorFlags();  // the stream is idle between steps
  absl::StatusOr<StepResult> result = fill(*step.batch());
  // A failed step leaves gradients half accumulated; the next one must start clean.
  if (!result.ok()) ClearGrad(recorded_->parameters()).IgnoreError();
  // Queued kernels may still use the batch scope's arrays: wait before it frees them.
  const absl::Status synced = Synchronize();
  if (gpu_ != nullptr) gpu_->ClearErrorFlags();
  if (result.ok() && !synced.ok()) result = synced;
  const absl::Status ended = step.End();
  if (!result.ok()) return result.status();
  NDS_RETURN_IF_ERROR(ended);
  return result;
}

absl::StatusOr<StepResult> TrainingRun::Step(absl::Span<const engine::HostTensor> inputs,
                                             const engine::HostTensor& labels) {
  return StepWith([&](NDManager& batch) -> absl::StatusOr<StepResult> {
    std::vector<Named> named;
    named.reserve(inputs.size());
    for (const engine::HostTensor& t : inputs) {
      NDS_ASSIGN_OR_RETURN(NDArray array, Upload(batch, t, "input"));
      named.push_back({t.name, std::move(array)});
    }
    NDS_ASSIGN_OR_RETURN(NDArray label_array, Upload(batch, labels, "labels"));
    return RunStep(batch, named, Named{labels.name, std::move(label_array)});
  });
}

absl::StatusOr<StepResult> TrainingRun::Step(const engine::DeviceBatch& batch) {
  if (batch.arrays.empty() || batch.arrays.size() != batch.names.size()) {
    return absl::InvalidArgumentError("a batch needs its inputs and, last, its labels");
  }
  if (batch.manager == nullptr || batch.manager->parent() != scope_->manager()) {
    return absl::InvalidArgumentError("the batch was not uploaded under this session's scope");
  }
  return StepWith([&](NDManager& step) -> absl::StatusOr<StepResult> {
    std::vector<Named> named;
    named.reserve(batch.arrays.size() - 1);
    for (std::size_t i = 0; i + 1 < batch.arrays.size(); ++i) {
      named.push_back({batch.names[i], batch.arrays[i]});
    }
    return RunStep(step, named, Named{batch.names.back(), batch.arrays.back()});
  });
}

absl::StatusOr<StepResult> TrainingRun::RunStep(NDManager& batch, absl::Span<const Named> inputs,
                                                const Named& labels) {
  const auto specs = graph_->inputs();
  std::vector<NDArray> arrays(specs.size());
  for (const Named& t : inputs) {
    std::size_t i = 0;
    while (i < specs.size() && specs[i].name != t.name) ++i;
    if (i == specs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown input '", t.name, "'"));
    }
    if (!arrays[i].is_null()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "' given twice"));
    }
    if (carried_.has_value() &&
        (static_cast<int>(i) == carried_inputs_[0] || static_cast<int>(i) == carried_inputs_[1])) {
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name,
                                                     "' is the recurrent state the session carries "
                                                     "(truncated_bptt_steps); leave it out"));
    }
    if (t.array.dtype() != specs[i].dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", t.name, "' is ", DTypeName(t.array.dtype()), ", the model wants ",
                       DTypeName(specs[i].dtype)));
    }
    arrays[i] = t.array;
  }
  if (carried_.has_value()) {
    const std::vector<Variable> state = carried_->Load();
    for (int k = 0; k < 2; ++k)
      arrays[static_cast<std::size_t>(carried_inputs_[k])] = state[k].value();
    if (sequence_input_ >= 0) {
      const NDArray& x = arrays[static_cast<std::size_t>(sequence_input_)];
      if (!x.is_null() && (x.rank() < 1 || x.shape()[0] != options_.truncated_bptt_steps)) {
        return absl::InvalidArgumentError(
            absl::StrCat("input '", specs[static_cast<std::size_t>(sequence_input_)].name, "' is ",
                         x.DebugString(), "; with truncated_bptt_steps ",
                         options_.truncated_bptt_steps, " a batch is that many time steps"));
      }
    }
  }
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (arrays[i].is_null()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", specs[i].name, "' is missing"));
    }
  }
  const DType label_dtype =
      options_.loss == LossKind::kCrossEntropy ? DType::kInt64 : DType::kFp32;
  if (labels.array.dtype() != label_dtype) {
    return absl::InvalidArgumentError(absl::StrCat("labels are ", DTypeName(labels.array.dtype()),
                                                   ", the loss wants ", DTypeName(label_dtype)));
  }
  const NDArray& label_array = labels.array;
  std::vector<std::string> target{options_.target_output};
  if (carried_.has_value()) {
    target.push_back(carried_outputs_[0]);
    target.push_back(carried_outputs_[1]);
  }
  absl::StatusOr<std::vector<Variable>> forward = recorded_->Forward(batch, arrays, target);
  if (!forward.ok()) return forward.status();
  const Variable& out = (*forward)[0];
  const Variable y = Variable::Constant(label_array);
  absl::StatusOr<Variable> loss;
  switch (options_.loss) {
    case LossKind::kCrossEntropy:
      loss = CrossEntropyLoss(batch, out, y);
      break;
    case LossKind::kBceWithLogits:
      loss = BceWithLogitsLoss(batch, out, y);
      break;
    case LossKind::kMse:
      loss = MseLoss(batch, out, y);
      break;
  }
  if (!loss.ok()) {
    // Shape mismatches between the target and the labels are the client's.
    return absl::InvalidArgumentError(absl::StrCat("labels for '", options_.target_output,
                                                   "': ", loss.status().message()));
  }
  NDS_RETURN_IF_ERROR(Backward(*loss, batch));
  NDS_ASSIGN_OR_RETURN(NDArray squares, NewF32(batch, {}));
  NDS_RETURN_IF_ERROR(Fill(squares, 0.0f));
  for (const Variable& p : recorded_->parameters()) {
    NDS_RETURN_IF_ERROR(AddGradSquares(p, squares));
  }
  // Everything up to here was queued: wait for it once, then refuse a batch whose ids
  // or labels the device found out of range before any parameter moves, and read the
  // two figures the result reports.
  NDS_RETURN_IF_ERROR(Synchronize());
  NDS_RETURN_IF_ERROR(CheckDeviceErrors());
  float figures[2] = {0.0f, 0.0f};
  NDS_RETURN_IF_ERROR(loss->value().CopyToHost(
      absl::MakeSpan(reinterpret_cast<std::uint8_t*>(&figures[0]), sizeof(float))));
  NDS_RETURN_IF_ERROR(squares.CopyToHost(
      absl::MakeSpan(reinterpret_cast<std::uint8_t*>(&figures[1]), sizeof(float))));
  NDS_RETURN_IF_ERROR(optimizer_->Step());
  if (carried_.has_value()) {
    // The next step starts from this one's final state but cannot reach back into it.
    NDS_RETURN_IF_ERROR(carried_->Carry({(*forward)[1], (*forward)[2]}));
  }
  NDS_RETURN_IF_ERROR(ClearGrad(recorded_->parameters()));
  StepResult result;
  result.step = ++steps_;
  result.loss = figures[0];
  result.grad_norm = std::sqrt(figures[1]);
  result.batch_peak_bytes = batch.bytes();
  return result;
}

absl::StatusOr<std::vector<engine::HostTensor>> TrainingRun::Parameters() const {
  std::vector<engine::HostTensor> values;
  const auto& names = recorded_->parameter_names();
  const auto& parameters = recorded_->parameters();
  values.reserve(parameters.size());
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    engine::HostTensor t;
    t.name = names[i];
    t.dtype = parameters[i].value().dtype();
    t.shape.assign(parameters[i].shape().begin(), parameters[i].shape().end());
    NDS_ASSIGN_OR_RETURN(t.bytes, parameters[i].value().ToHost());
    values.push_back(std::move(t));
  }
  return values;
}

}  // namespace ndserve::train
