#include "train/onnx_lstm.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "train/elementwise_ops.h"
#include "train/linear_ops.h"
#include "train/shape_ops.h"

namespace ndserve::train {
namespace {

// ONNX LSTM input positions.
enum Slot { kX = 0, kW, kR, kB, kSeqLens, kInitialH, kInitialC, kPeepholes };

absl::StatusOr<Variable> ZeroState(NDManager& scope, std::int64_t batch, std::int64_t hidden) {
  const std::int64_t shape[] = {batch, hidden};
  NDS_ASSIGN_OR_RETURN(NDArray zeros, scope.Zeros(shape, DType::kFp32));
  return Variable::Constant(std::move(zeros));
}

// A [1, B, H] initial state as [B, H], or zeros when the node has none.
absl::StatusOr<Variable> InitialState(NDManager& scope, const Variable* state, std::int64_t batch,
                                      std::int64_t hidden, absl::string_view what) {
  if (state == nullptr) return ZeroState(scope, batch, hidden);
  const auto shape = state->shape();
  if (shape.size() != 3 || shape[0] != 1 || shape[1] != batch || shape[2] != hidden) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be [1, ", batch, ", ", hidden,
                                                   "], not ", state->value().DebugString()));
  }
  return Reshape(scope, *state, {batch, hidden});
}

}  // namespace

absl::StatusOr<OnnxLstmOutputs> OnnxLstm(NDManager& scope, const kernels::RecurrentAttrs& attrs,
                                         absl::Span<const Variable> in) {
  if (attrs.direction != kernels::RnnDirection::kForward || attrs.layout != 0 ||
      attrs.clip != 0.0f) {
    return absl::UnimplementedError(
        "training replays forward LSTMs with layout 0 and no clipping only");
  }
  const auto slots = attrs.Slots(in.size());
  auto input = [&](Slot s) -> const Variable* {
    return slots[s] >= 0 ? &in[static_cast<std::size_t>(slots[s])] : nullptr;
  };
  if (input(kX) == nullptr || input(kW) == nullptr || input(kR) == nullptr) {
    return absl::InvalidArgumentError("LSTM needs X, W and R");
  }
  if (input(kSeqLens) != nullptr || input(kPeepholes) != nullptr) {
    return absl::UnimplementedError("training replays LSTMs without sequence_lens or peepholes");
  }
  const Variable& x = *input(kX);
  const std::int64_t hidden = attrs.hidden_size;
  if (x.shape().size() != 3 || hidden <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LSTM X must be [T, B, I], not ", x.value().DebugString()));
  }
  const std::int64_t steps = x.shape()[0];
  const std::int64_t batch = x.shape()[1];
  const std::int64_t features = x.shape()[2];

  NDS_ASSIGN_OR_RETURN(Variable w, Reshape(scope, *input(kW), {4 * hidden, features}));
  NDS_ASSIGN_OR_RETURN(Variable r, Reshape(scope, *input(kR), {4 * hidden, hidden}));
  Variable bias;  // null: no B
  if (const Variable* b = input(kB); b != nullptr) {
    NDS_ASSIGN_OR_RETURN(Variable flat, Reshape(scope, *b, {8 * hidden}));
    NDS_ASSIGN_OR_RETURN(Variable wb, Narrow(scope, flat, 0, 0, 4 * hidden));
    NDS_ASSIGN_OR_RETURN(Variable rb, Narrow(scope, flat, 0, 4 * hidden, 4 * hidden));
    NDS_ASSIGN_OR_RETURN(bias, Add(scope, wb, rb));
  }
  NDS_ASSIGN_OR_RETURN(Variable h,
                       InitialState(scope, input(kInitialH), batch, hidden, "LSTM initial_h"));
  NDS_ASSIGN_OR_RETURN(Variable c,
                       InitialState(scope, input(kInitialC), batch, hidden, "LSTM initial_c"));
  GemmOptions transposed;
  transposed.trans_b = true;
  std::vector<Variable> ys;
  ys.reserve(static_cast<std::size_t>(steps));
  for (std::int64_t t = 0; t < steps; ++t) {
    NDS_ASSIGN_OR_RETURN(Variable xt, Narrow(scope, x, 0, t, 1));
    NDS_ASSIGN_OR_RETURN(xt, Reshape(scope, xt, {batch, features}));
    NDS_ASSIGN_OR_RETURN(Variable gates, Gemm(scope, xt, w, bias, transposed));
    NDS_ASSIGN_OR_RETURN(gates, Gemm(scope, h, r, gates, transposed));
    auto gate = [&](int k) { return Narrow(scope, gates, 1, k * hidden, hidden); };
    NDS_ASSIGN_OR_RETURN(Variable i, gate(0));
    NDS_ASSIGN_OR_RETURN(Variable o, gate(1));
    NDS_ASSIGN_OR_RETURN(Variable f, gate(2));
    NDS_ASSIGN_OR_RETURN(Variable g, gate(3));
    NDS_ASSIGN_OR_RETURN(i, Sigmoid(scope, i));
    NDS_ASSIGN_OR_RETURN(o, Sigmoid(scope, o));
    NDS_ASSIGN_OR_RETURN(f, Sigmoid(scope, f));
    NDS_ASSIGN_OR_RETURN(g, Tanh(scope, g));
    NDS_ASSIGN_OR_RETURN(Variable kept, Mul(scope, f, c));
    NDS_ASSIGN_OR_RETURN(Variable added, Mul(scope, i, g));
    NDS_ASSIGN_OR_RETURN(c, Add(scope, kept, added));
    NDS_ASSIGN_OR_RETURN(Variable squashed, Tanh(scope, c));
    NDS_ASSIGN_OR_RETURN(h, Mul(scope, o, squashed));
    NDS_ASSIGN_OR_RETURN(Variable yt, Reshape(scope, h, {1, 1, batch, hidden}));
    ys.push_back(std::move(yt));
  }
  OnnxLstmOutputs out;
  if (ys.empty()) return absl::InvalidArgumentError("LSTM X has no time steps");
  NDS_ASSIGN_OR_RETURN(out.y, Concat(scope, ys, 0));
  NDS_ASSIGN_OR_RETURN(out.y_h, Reshape(scope, h, {1, batch, hidden}));
  NDS_ASSIGN_OR_RETURN(out.y_c, Reshape(scope, c, {1, batch, hidden}));
  return out;
}

}  // namespace ndserve::train
