// PredictorContext's Loop (docs/design.md §4): RunLoop and what it needs, apart from the
// rest of the context (predictor_context.cc) for size.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/predictor_context.h"
#include "engine/predictor_context_util.h"
#include "kernels/node_attrs.h"
#include "kernels/shape_inference.h"

namespace ndserve::engine {

using predictor_context_internal::AtNode;
using predictor_context_internal::ViewOf;

// What a running loop made: the arrays of the iteration under way, and those it carries
// from the last one.
struct PredictorContext::LoopFrame {
  int loop = kNoValue;  // the Loop node
  std::vector<NDArray> made;
};

void PredictorContext::NoteMade(const NDArray& array, int scope) {
  if (scope == kNoValue) return;
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    if ((*it)->loop == scope) {
      (*it)->made.push_back(array);
      return;
    }
  }
}

int PredictorContext::ScopeOf(int value) const {
  const Graph& graph = model_.graph();
  const Value& v = graph.values()[value];
  if (v.source == ValueSource::kNode) return graph.nodes()[v.index].loop;
  if (v.source == ValueSource::kLoop) return v.index;
  return kNoValue;
}

absl::StatusOr<PredictorContext::Slot> PredictorContext::DeviceSlot(int value) {
  const Slot& slot = slots_[value];
  if (slot.array.is_null()) {
    return absl::InternalError(
        absl::StrCat("value '", model_.graph().values()[value].name, "' was never computed"));
  }
  if (!slot.host) return slot;
  NDS_RETURN_IF_ERROR(DeviceView(value).status());
  return Slot{slots_[value].uploaded, slots_[value].shape};
}

absl::StatusOr<int64_t> PredictorContext::HostScalar(int value, DType dtype,
                                                     absl::string_view what) {
  const Graph& graph = model_.graph();
  const Value& v = graph.values()[value];
  const Slot& slot = slots_[value];
  if (slot.array.is_null()) {
    return absl::InternalError(absl::StrCat(what, " '", v.name, "' was never computed"));
  }
  if (slot.array.dtype() != dtype || kernels::NumElements(slot.shape) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", v.name, "' must be one ",
                                                   DTypeName(dtype), ", it is ",
                                                   DTypeName(slot.array.dtype()), " ",
                                                   kernels::ShapeToString(slot.shape)));
  }
  int64_t out = 0;
  const std::size_t size = DTypeSize(dtype);
  if (v.source == ValueSource::kInitializer &&
      graph.initializers()[v.index].bytes.size() == size) {
    std::memcpy(&out, graph.initializers()[v.index].bytes.data(), size);  // no device read
  } else if (gpu_ != nullptr && !slot.host) {
    // Computed on the device: the loop waits for it here.
    NDS_ASSIGN_OR_RETURN(void* data, slot.array.Data());
    NDS_RETURN_IF_ERROR(gpu_->CopyToHost(&out, data, size));
    NDS_RETURN_IF_ERROR(gpu_->Synchronize());
  } else {
    NDS_RETURN_IF_ERROR(
        slot.array.CopyToHost(absl::MakeSpan(reinterpret_cast<uint8_t*>(&out), size)));
  }
  return dtype == DType::kBool ? static_cast<int64_t>((out & 0xff) != 0) : out;
}

absl::Status PredictorContext::SetLoopScalar(int value, DType dtype, int64_t v, int scope) {
  // A host value, as shape arithmetic reads it; a device node reading it gets a copy.
  NDManager* where = manager_.get();
  if (gpu_ != nullptr) {
    NDS_RETURN_IF_ERROR(EnsureHostManager());
    where = host_manager_.get();
  }
  const uint8_t flag = v != 0;
  const absl::Span<const uint8_t> bytes =
      dtype == DType::kBool ? absl::MakeConstSpan(&flag, 1)
                            : absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(&v), sizeof(v));
  NDS_ASSIGN_OR_RETURN(NDArray array,
                       where->FromHost({}, dtype, bytes, model_.graph().values()[value].name));
  NoteMade(array, scope);
  slots_[value] = Slot{std::move(array), {}, gpu_ != nullptr};
  return absl::OkStatus();
}

absl::Status PredictorContext::FreeDead(LoopFrame& frame, absl::Span<const Slot> live,
                                        std::vector<NDArray>* scanned) {
  std::vector<NDArray> dead, kept;
  for (NDArray& a : frame.made) {
    if (!a.valid()) continue;  // released within the iteration
    bool used = false;
    for (const Slot& s : live) used = used || s.array.SameArray(a);
    if (used) {
      kept.push_back(std::move(a));
      continue;
    }
    bool stacked = false;
    if (scanned != nullptr) {
      for (const NDArray& s : *scanned) stacked = stacked || s.SameArray(a);
    }
    if (!stacked) dead.push_back(std::move(a));
  }
  frame.made = std::move(kept);
  if (dead.empty()) return absl::OkStatus();
  // The pool is not stream-ordered: queued kernels may still read these.
  if (gpu_ != nullptr && queued_) NDS_RETURN_IF_ERROR(gpu_->Synchronize());
  for (const NDArray& a : dead) {
    if (a.valid()) NDManager::UnsafeFree(a).IgnoreError();  // listed twice: freed once
  }
  return absl::OkStatus();
}

absl::StatusOr<PredictorContext::Slot> PredictorContext::Copy(const Slot& slot,
                                                              absl::string_view name,
                                                              int scope) {
  NDS_ASSIGN_OR_RETURN(NDArray array, manager_->Create(slot.shape, slot.array.dtype(), name));
  NoteMade(array, scope);
  NDS_ASSIGN_OR_RETURN(kernels::TensorView in, ViewOf(slot.array, slot.shape));
  NDS_ASSIGN_OR_RETURN(kernels::TensorView out, ViewOf(array, slot.shape));
  NDS_ASSIGN_OR_RETURN(kernels::KernelFn copy,
                       kernels::Lookup(kernels::OpKind::kIdentity, model_.device()));
  NDS_RETURN_IF_ERROR(copy(node_context_, absl::MakeConstSpan(&in, 1), absl::MakeConstSpan(&out, 1),
                           kernels::NoAttrs{}));
  return Slot{std::move(array), slot.shape};
}

absl::StatusOr<PredictorContext::Slot> PredictorContext::Stack(const ScanOutput& scan,
                                                               absl::Span<const Slot> parts,
                                                               absl::string_view name,
                                                               int scope) {
  if (parts.empty()) {
    // No iteration: the declared shape with nothing along the axis.
    kernels::Shape shape;
    if (!scan.any_rank) {
      for (int64_t d : scan.dims) shape.push_back(std::max<int64_t>(d, 0));
    }
    const int64_t rank = static_cast<int64_t>(shape.size()) + (scan.new_axis ? 1 : 0);
    int64_t axis = scan.axis < 0 ? scan.axis + rank : scan.axis;
    if (scan.any_rank || axis < 0 || axis >= rank) {
      shape.assign({0});
    } else if (scan.new_axis) {
      shape.insert(shape.begin() + axis, 0);
    } else {
      shape[axis] = 0;
    }
    NDS_ASSIGN_OR_RETURN(NDArray array, manager_->Create(shape, scan.dtype, name));
    NoteMade(array, scope);
    return Slot{std::move(array), std::move(shape)};
  }
  const std::size_t rank = parts[0].shape.size();
  const int64_t out_rank = static_cast<int64_t>(rank) + (scan.new_axis ? 1 : 0);
  const int64_t axis = scan.axis < 0 ? scan.axis + out_rank : scan.axis;
  if (axis < 0 || axis >= out_rank) {
    return absl::InvalidArgumentError(absl::StrCat("scan output '", name, "': axis ", scan.axis,
                                                   " is out of range for its rank ", rank));
  }
  std::vector<kernels::TensorView> views;
  std::vector<kernels::TensorDesc> descs;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Slot& p = parts[i];
    if (p.array.dtype() != parts[0].array.dtype() ||
        (scan.new_axis && p.shape != parts[0].shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scan output '", name, "' is ", DTypeName(parts[0].array.dtype()),
          kernels::ShapeToString(parts[0].shape), " in iteration 0 but ",
          DTypeName(p.array.dtype()), kernels::ShapeToString(p.shape), " in iteration ", i,
          " (the values of all iterations must have one shape)"));
    }
    kernels::Shape shape = p.shape;
    if (scan.new_axis) shape.insert(shape.begin() + axis, 1);
    NDS_ASSIGN_OR_RETURN(kernels::TensorView view, ViewOf(p.array, shape));
    descs.push_back(view.desc());
    views.push_back(std::move(view));
  }
  kernels::AttrMap attr_map;
  attr_map["axis"] = axis;
  NDS_ASSIGN_OR_RETURN(kernels::OpAttrs attrs,
                       kernels::BuildOpAttrs(kernels::OpKind::kConcat, model_.graph().opset(),
                                             attr_map, kernels::HostInputs()));
  absl::StatusOr<std::vector<kernels::TensorDesc>> inferred =
      kernels::InferOutputs(kernels::OpKind::kConcat, descs, attrs);
  if (!inferred.ok()) {
    return absl::Status(inferred.status().code(),
                        absl::StrCat("scan output '", name, "': ", inferred.status().message()));
  }
  const kernels::TensorDesc& d = (*inferred)[0];
  NDS_ASSIGN_OR_RETURN(NDArray array, manager_->Create(d.shape, d.dtype, name));
  NoteMade(array, scope);
  output_bytes_ += array.nbytes();
  NDS_ASSIGN_OR_RETURN(kernels::TensorView out, ViewOf(array, d.shape));
  NDS_ASSIGN_OR_RETURN(kernels::KernelFn concat,
                       kernels::Lookup(kernels::OpKind::kConcat, model_.device()));
  kernels::KernelContext ctx = node_context_;
  scratch_manager_ = manager_.get();
  scratch_on_host_ = false;
  absl::Status ran = concat(ctx, views, absl::MakeConstSpan(&out, 1), attrs);
  ReleaseScratch();
  NDS_RETURN_IF_ERROR(ran);
  return Slot{std::move(array), d.shape};
}

absl::Status PredictorContext::RunLoop(int n) {
  const Graph& graph = model_.graph();
  const Node& node = graph.nodes()[n];
  const LoopBody& body = *node.body;
  const std::size_t carried = body.carried.size();
  const std::size_t scans = body.scans.size();
  // Inputs: [trip count, cond, initial (N), body cond, body carried (N), body scans (K), ...].
  const int body_cond = node.inputs[2 + carried];
  NDS_ASSIGN_OR_RETURN(const int64_t trips,
                       HostScalar(node.inputs[0], DType::kInt64, "trip count"));
  NDS_ASSIGN_OR_RETURN(int64_t go, HostScalar(node.inputs[1], DType::kBool, "condition"));
  std::vector<Slot> state(carried);
  for (std::size_t j = 0; j < carried; ++j) {
    NDS_ASSIGN_OR_RETURN(state[j], DeviceSlot(node.inputs[2 + j]));
  }
  LoopFrame frame;
  frame.loop = n;
  frames_.push_back(&frame);
  std::vector<std::vector<Slot>> parts(scans);
  std::vector<NDArray> scanned;  // arrays the iterations made that scan outputs hold
  // Conditions of Ifs outside the body stay read; the body's are read anew each time.
  const absl::flat_hash_map<int, bool> outer_conditions = conditions_;
  const bool release_early = gpu_ == nullptr;
  absl::Status status;
  int64_t i = 0;
  for (; i < trips && go != 0; ++i) {
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
      status = absl::CancelledError("request cancelled");
      break;
    }
    conditions_ = outer_conditions;
    status = SetLoopScalar(body.iter, DType::kInt64, i, n);
    if (status.ok()) status = SetLoopScalar(body.cond, DType::kBool, go, n);
    for (std::size_t j = 0; j < carried && status.ok(); ++j) slots_[body.carried[j]] = state[j];
    for (int b : body.nodes) {
      if (!status.ok()) break;
      const Node& bn = graph.nodes()[b];
      bool run = true;
      if (!bn.guards.empty()) {
        absl::StatusOr<bool> holds = GuardsHold(bn);
        status = AtNode(holds.status(), bn);
        run = status.ok() && *holds;
      }
      if (run) status = AtNode(RunNode(b), bn);
      if (status.ok() && release_early) {
        for (int s : graph.ReleasedAfter(b)) {
          if (slots_[s].array.valid()) NDManager::UnsafeFree(slots_[s].array).IgnoreError();
        }
      }
    }
    if (!status.ok()) break;
    absl::StatusOr<int64_t> next = HostScalar(body_cond, DType::kBool, "body condition");
    status = next.status();
    for (std::size_t j = 0; j < carried && status.ok(); ++j) {
      absl::StatusOr<Slot> s = DeviceSlot(node.inputs[3 + carried + j]);
      status = s.status();
      if (status.ok()) state[j] = *std::move(s);
    }
    std::vector<Slot> this_scan;
    for (std::size_t k = 0; k < scans && status.ok(); ++k) {
      absl::StatusOr<Slot> s = DeviceSlot(node.inputs[3 + 2 * carried + k]);
      status = s.status();
      if (!status.ok()) break;
      parts[k].push_back(*s);
      this_scan.push_back(*std::move(s));
    }
    if (!status.ok()) break;
    go = *next;
    // What this iteration made that a scan output holds stays until the stacking.
    for (NDArray& a : frame.made) {
      for (const Slot& s : this_scan) {
        if (a.valid() && s.array.SameArray(a)) scanned.push_back(a);
      }
    }
    status = FreeDead(frame, state, &scanned);
    if (!status.ok()) break;
  }
  conditions_ = outer_conditions;
  frames_.pop_back();
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("iteration ", i, ": ", status.message()));
  }
  // The final carried values: what the loop made is handed on; a value made outside it
  // (no iteration ran, or the body passed an outer value through) is copied, so that its
  // storage keeps the lifetime liveness gave it.
  for (std::size_t j = 0; j < carried; ++j) {
    const int out = node.outputs[j];
    if (out == kNoValue) continue;
    bool made = false;
    for (const NDArray& a : frame.made) made = made || state[j].array.SameArray(a);
    if (made) {
      NoteMade(state[j].array, node.loop);
      slots_[out] = state[j];
    } else {
      NDS_ASSIGN_OR_RETURN(slots_[out], Copy(state[j], graph.values()[out].name, node.loop));
    }
  }
  for (std::size_t k = 0; k < scans; ++k) {
    const int out = node.outputs[carried + k];
    if (out == kNoValue) continue;
    NDS_ASSIGN_OR_RETURN(slots_[out], Stack(body.scans[k], parts[k], graph.values()[out].name,
                                            node.loop));
  }
  NotePeak();
  // The per-iteration scan values are in the stacked outputs now.
  parts.clear();
  frame.made.insert(frame.made.end(), scanned.begin(), scanned.end());
  std::vector<Slot> finals;
  for (std::size_t j = 0; j < carried; ++j) finals.push_back(state[j]);
  return FreeDead(frame, finals, nullptr);
}

}  // namespace ndserve::engine
