#include "train/recorded_graph.h"

#include <algorithm>
#include <variant>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/op_kind.h"
#include "train/elementwise_ops.h"
#include "train/linear_ops.h"
#include "train/onnx_lstm.h"
#include "train/reduce_ops.h"
#include "train/shape_ops.h"

namespace ndserve::train {
namespace {

using kernels::OpKind;

bool HasBackward(OpKind op) {
  switch (op) {
    case OpKind::kGemm:
    case OpKind::kMatMul:
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kRelu:
    case OpKind::kSigmoid:
    case OpKind::kTanh:
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kLayerNormalization:
    case OpKind::kGather:
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kConcat:
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kIdentity:
    case OpKind::kLSTM:
      return true;
    default:
      return false;
  }
}

template <typename T>
const T& AttrsOr(const kernels::OpAttrs& attrs) {
  static const T kDefault{};
  const T* a = std::get_if<T>(&attrs);
  return a != nullptr ? *a : kDefault;
}

// One node's outputs from its inputs.
absl::StatusOr<Variable> RunNode(NDManager& scope, const engine::Node& node,
                                 const std::vector<Variable>& in) {
  auto arg = [&](std::size_t i) { return i < in.size() ? in[i] : Variable(); };
  switch (node.op) {
    case OpKind::kGemm:
    case OpKind::kMatMul: {
      const kernels::GemmAttrs& a = AttrsOr<kernels::GemmAttrs>(node.attrs);
      Variable y;
      if (node.op == OpKind::kMatMul) {
        NDS_ASSIGN_OR_RETURN(y, MatMul(scope, in[0], in[1]));
        if (a.matmul_bias) {
          NDS_ASSIGN_OR_RETURN(y, Add(scope, y, in[2]));
        }
      } else {
        GemmOptions o{a.alpha, a.beta, a.trans_a, a.trans_b};
        NDS_ASSIGN_OR_RETURN(y, Gemm(scope, in[0], in[1], arg(2), o));
      }
      if (a.epilogue.activation == kernels::GemmActivation::kRelu) return Relu(scope, y);
      if (a.epilogue.activation != kernels::GemmActivation::kNone) {
        return absl::UnimplementedError("fused activation other than Relu");
      }
      return y;
    }
    case OpKind::kAdd:
      return Add(scope, in[0], in[1]);
    case OpKind::kSub:
      return Sub(scope, in[0], in[1]);
    case OpKind::kMul:
      return Mul(scope, in[0], in[1]);
    case OpKind::kDiv:
      return Div(scope, in[0], in[1]);
    case OpKind::kRelu:
      return Relu(scope, in[0]);
    case OpKind::kSigmoid:
      return Sigmoid(scope, in[0]);
    case OpKind::kTanh:
      return Tanh(scope, in[0]);
    case OpKind::kSoftmax:
      return Softmax(scope, in[0], AttrsOr<kernels::SoftmaxAttrs>(node.attrs).axis);
    case OpKind::kLogSoftmax:
      return LogSoftmax(scope, in[0], AttrsOr<kernels::SoftmaxAttrs>(node.attrs).axis);
    case OpKind::kLayerNormalization: {
      const auto& a = AttrsOr<kernels::LayerNormAttrs>(node.attrs);
      return LayerNorm(scope, in[0], in[1], arg(2), a.axis, a.epsilon);
    }
    case OpKind::kGather:
      return Gather(scope, in[0], in[1], AttrsOr<kernels::GatherAttrs>(node.attrs).axis);
    case OpKind::kReduceSum:
    case OpKind::kReduceMean: {
      const auto& a = AttrsOr<kernels::ReduceAttrs>(node.attrs);
      if (a.axes.empty() && a.noop_with_empty_axes) return in[0];
      return node.op == OpKind::kReduceSum ? ReduceSum(scope, in[0], a.axes, a.keepdims)
                                           : ReduceMean(scope, in[0], a.axes, a.keepdims);
    }
    case OpKind::kConcat:
      return Concat(scope, in, AttrsOr<kernels::ConcatAttrs>(node.attrs).axis);
    case OpKind::kReshape:
      return Reshape(scope, in[0], AttrsOr<kernels::ReshapeAttrs>(node.attrs).shape);
    case OpKind::kFlatten:
      return Flatten(scope, in[0], AttrsOr<kernels::FlattenAttrs>(node.attrs).axis);
    case OpKind::kIdentity:
      return in[0];
    default:
      break;
  }
  return absl::UnimplementedError("no backward for this op");
}

}  // namespace

absl::StatusOr<RecordedGraph> RecordedGraph::Create(const engine::Graph& graph,
                                                    absl::Span<const std::string> trainable,
                                                    NDManager& trainer) {
  for (const engine::Node& node : graph.nodes()) {
    if (!HasBackward(node.op) || node.has_dynamic_attrs()) {
      return absl::UnimplementedError(absl::StrCat(
          "node '", node.name, "' (", kernels::OpKindName(node.op), "): training supports no ",
          node.has_dynamic_attrs() ? "shapes computed per request" : "backward for this op"));
    }
  }
  absl::flat_hash_set<std::string> wanted(trainable.begin(), trainable.end());
  for (const std::string& name : trainable) {
    const auto inits = graph.initializers();
    auto it = std::find_if(inits.begin(), inits.end(),
                           [&](const engine::Initializer& i) { return i.name == name; });
    if (it == inits.end() || it->dtype != DType::kFp32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trainable '", name, "' is not an FP32 initializer of ", graph.name()));
    }
  }
  RecordedGraph out(graph);
  for (const engine::Initializer& init : graph.initializers()) {
    NDS_ASSIGN_OR_RETURN(
        NDArray value,
        trainer.FromHost(init.shape, init.dtype,
                         absl::Span<const std::uint8_t>(
                             reinterpret_cast<const std::uint8_t*>(init.bytes.data()), init.bytes.size()),
                         init.name));
    const bool train = init.dtype == DType::kFp32 && (wanted.empty() || wanted.contains(init.name));
    if (train) {
      NDS_ASSIGN_OR_RETURN(Variable p, Variable::Parameter(value, trainer));
      out.parameters_.push_back(p);
      out.parameter_names_.push_back(init.name);
      out.initializers_.push_back(p);
    } else {
      out.initializers_.push_back(Variable::Constant(value));
    }
  }
  return out;
}

absl::StatusOr<std::vector<Variable>> RecordedGraph::Forward(
    NDManager& batch, absl::Span<const NDArray> inputs,
    absl::Span<const std::string> outputs) const {
  const engine::Graph& g = *graph_;
  if (inputs.size() != g.inputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat(g.name(), " takes ", g.inputs().size(),
                                                   " inputs, got ", inputs.size()));
  }
  std::vector<int> wanted;
  if (outputs.empty()) {
    wanted.assign(g.output_values().begin(), g.output_values().end());
  } else {
    for (const std::string& name : outputs) {
      const int id = g.FindValue(name);
      if (id == engine::kNoValue) {
        return absl::InvalidArgumentError(absl::StrCat("no value '", name, "' in ", g.name()));
      }
      wanted.push_back(id);
    }
  }
  std::vector<Variable> values(g.values().size());
  auto resolve = [&](int id) -> Variable {
    const engine::Value& v = g.values()[static_cast<std::size_t>(id)];
    if (v.source == engine::ValueSource::kInitializer) return initializers_[static_cast<std::size_t>(v.index)];
    if (v.source == engine::ValueSource::kInput) return Variable::Constant(inputs[static_cast<std::size_t>(v.index)]);
    return values[static_cast<std::size_t>(id)];
  };
  auto done = [&]() {
    return std::all_of(wanted.begin(), wanted.end(), [&](int id) { return !resolve(id).is_null(); });
  };
  for (const engine::Node& node : g.nodes()) {
    if (done()) break;
    std::vector<Variable> in;
    for (int id : node.inputs) in.push_back(resolve(id));
    if (node.op == OpKind::kLSTM) {
      // Three outputs (Y, Y_h, Y_c): the final state is what truncated BPTT carries.
      absl::StatusOr<OnnxLstmOutputs> lstm =
          OnnxLstm(batch, AttrsOr<kernels::RecurrentAttrs>(node.attrs), in);
      if (!lstm.ok()) {
        return absl::Status(lstm.status().code(),
                            absl::StrCat("node '", node.name, "': ", lstm.status().message()));
      }
      const Variable outs[] = {lstm->y, lstm->y_h, lstm->y_c};
      for (std::size_t k = 0; k < node.outputs.size() && k < 3; ++k) {
        if (node.outputs[k] != engine::kNoValue) {
          values[static_cast<std::size_t>(node.outputs[k])] = outs[k];
        }
      }
      continue;
    }
    absl::StatusOr<Variable> y = RunNode(batch, node, in);
    if (!y.ok()) {
      return absl::Status(y.status().code(),
                          absl::StrCat("node '", node.name, "': ", y.status().message()));
    }
    if (!node.outputs.empty() && node.outputs[0] != engine::kNoValue) {
      values[static_cast<std::size_t>(node.outputs[0])] = *std::move(y);
    }
  }
  std::vector<Variable> result;
  for (int id : wanted) result.push_back(resolve(id));
  return result;
}

}  // namespace ndserve::train
