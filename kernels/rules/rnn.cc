// Rules of the recurrent ops LSTM, GRU and RNN, and which ops take absent optional inputs
// before present ones (optional_inputs.h).
#include <array>
#include <bit>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/op_rules.h"
#include "kernels/optional_inputs.h"
#include "kernels/rules/rule_util.h"

namespace ndserve::kernels {

bool AcceptsAbsentInputs(OpKind op) {
  return op == OpKind::kLSTM || op == OpKind::kGRU || op == OpKind::kRNN;
}

int64_t PresentInputsMask(absl::Span<const std::string> inputs) {
  int64_t mask = 0;
  for (std::size_t i = 0; i < inputs.size() && i < 32; ++i) {
    if (!inputs[i].empty()) mask |= int64_t{1} << i;
  }
  return mask;
}

namespace rules {
namespace {

// Gates per hidden unit: the rows of W and R per direction are gates * hidden_size.
int GateCount(OpKind op) {
  switch (op) {
    case OpKind::kLSTM:
      return 4;
    case OpKind::kGRU:
      return 3;
    default:
      return 1;
  }
}

int MaxInputs(OpKind op) { return op == OpKind::kLSTM ? 8 : 6; }
int MaxOutputs(OpKind op) { return op == OpKind::kLSTM ? 3 : 2; }

// Only the default activations have kernels. `activations` may name them explicitly
// (PyTorch writes ["Tanh"] for every RNN); the loader joins a list with ','.
absl::Status CheckActivations(OpKind op, const AttrMap& attrs) {
  const char* defaults = op == OpKind::kLSTM  ? "Sigmoid,Tanh,Tanh"
                         : op == OpKind::kGRU ? "Sigmoid,Tanh"
                                              : "Tanh";
  NDS_ASSIGN_OR_RETURN(std::optional<std::string> names,
                       FindAttr<std::string>(op, attrs, "activations"));
  if (!names.has_value() && !attrs.contains("activation_alpha") &&
      !attrs.contains("activation_beta")) {
    return absl::OkStatus();
  }
  // Bidirectional nodes list the functions once per direction.
  const std::string twice = absl::StrCat(defaults, ",", defaults);
  if (names.has_value() && !attrs.contains("activation_alpha") &&
      !attrs.contains("activation_beta") &&
      (absl::EqualsIgnoreCase(*names, defaults) || absl::EqualsIgnoreCase(*names, twice))) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(
      absl::StrCat(OpKindName(op), ": activations ", names.has_value() ? *names : "with alpha/beta",
                   " are not supported; only the defaults (", defaults, ")"));
}

absl::Status CheckShape(OpKind op, const TensorDesc& t, absl::string_view what, const Shape& want) {
  if (t.shape == want) return absl::OkStatus();
  return Invalid(op, absl::StrCat(what, " has shape ", ShapeToString(t.shape), ", expected ",
                                  ShapeToString(want)));
}

}  // namespace

absl::StatusOr<OpAttrs> BuildRecurrent(OpKind op, int opset, const AttrMap& attrs,
                                       const HostInputs&) {
  RecurrentAttrs a;
  NDS_ASSIGN_OR_RETURN(a.hidden_size, RequireAttr<int64_t>(op, attrs, "hidden_size"));
  if (a.hidden_size <= 0) {
    return Invalid(op, absl::StrCat("hidden_size must be positive, got ", a.hidden_size));
  }
  NDS_ASSIGN_OR_RETURN(const std::string direction,
                       GetAttr<std::string>(op, attrs, "direction", "forward"));
  if (direction == "forward") {
    a.direction = RnnDirection::kForward;
  } else if (direction == "reverse") {
    a.direction = RnnDirection::kReverse;
  } else if (direction == "bidirectional") {
    a.direction = RnnDirection::kBidirectional;
  } else {
    return Invalid(op, absl::StrCat("direction must be forward, reverse or bidirectional, got '",
                                    direction, "'"));
  }
  // layout arrived with opset 14; earlier models are always time-major.
  if (opset >= 14) {
    NDS_ASSIGN_OR_RETURN(a.layout, GetAttr<int64_t>(op, attrs, "layout", 0));
  }
  if (a.layout != 0 && a.layout != 1) {
    return Invalid(op, absl::StrCat("layout must be 0 or 1, got ", a.layout));
  }
  NDS_ASSIGN_OR_RETURN(std::optional<float> clip, FindAttr<float>(op, attrs, "clip"));
  if (clip.has_value()) {
    if (!(*clip > 0.0f)) return Invalid(op, absl::StrCat("clip must be positive, got ", *clip));
    a.clip = *clip;
  }
  NDS_RETURN_IF_ERROR(CheckActivations(op, attrs));
  if (op == OpKind::kLSTM) {
    NDS_ASSIGN_OR_RETURN(const bool input_forget, GetBoolAttr(op, attrs, "input_forget", false));
    if (input_forget) {
      return absl::UnimplementedError("LSTM: input_forget=1 (coupled input and forget gates)");
    }
  }
  if (op == OpKind::kGRU) {
    NDS_ASSIGN_OR_RETURN(a.linear_before_reset,
                         GetBoolAttr(op, attrs, "linear_before_reset", false));
  }
  NDS_ASSIGN_OR_RETURN(std::optional<int64_t> present,
                       FindAttr<int64_t>(op, attrs, kPresentInputsAttr));
  if (present.has_value()) {
    const int64_t x_w_r = (1 << kRnnX) | (1 << kRnnW) | (1 << kRnnR);
    if ((*present & x_w_r) != x_w_r) return Invalid(op, "inputs X, W and R are required");
    if (*present >> MaxInputs(op) != 0) {
      return Invalid(op, absl::StrCat("has more than ", MaxInputs(op), " inputs"));
    }
    a.present = static_cast<uint32_t>(*present);
  }
  return a;
}

absl::StatusOr<Descs> InferRecurrent(OpKind op, absl::Span<const TensorDesc> in,
                                     const OpAttrs& attrs) {
  const RecurrentAttrs* a;
  NDS_RETURN_IF_ERROR(GetAttrs(op, attrs, &a));
  NDS_RETURN_IF_ERROR(CheckInputCount(op, in, 3, MaxInputs(op)));
  if (a->present != ~0u && static_cast<std::size_t>(std::popcount(a->present)) != in.size()) {
    return Invalid(op, absl::StrFormat("the node names %d inputs, the kernel got %d",
                                       std::popcount(a->present), in.size()));
  }
  const std::array<int, kRnnMaxInputs> slot = a->Slots(in.size());
  auto input = [&](int position) -> const TensorDesc* {
    return slot[position] < 0 || position >= MaxInputs(op) ? nullptr : &in[slot[position]];
  };
  const TensorDesc& x = *input(kRnnX);
  const TensorDesc& w = *input(kRnnW);
  const TensorDesc& r = *input(kRnnR);
  NDS_RETURN_IF_ERROR(CheckDType(op, x, "X", {DType::kFp32}));
  NDS_RETURN_IF_ERROR(CheckDType(op, w, "W", {DType::kFp32}));
  NDS_RETURN_IF_ERROR(CheckDType(op, r, "R", {DType::kFp32}));
  if (x.shape.size() != 3) {
    return Invalid(op, absl::StrCat("X must have rank 3, got ", ShapeToString(x.shape)));
  }
  const int64_t seq = a->layout == 0 ? x.shape[0] : x.shape[1];
  const int64_t batch = a->layout == 0 ? x.shape[1] : x.shape[0];
  const int64_t input_size = x.shape[2];
  const int64_t d = a->num_directions();
  const int64_t h = a->hidden_size;
  const int64_t g = GateCount(op);
  NDS_RETURN_IF_ERROR(CheckShape(op, w, "W", {d, g * h, input_size}));
  NDS_RETURN_IF_ERROR(CheckShape(op, r, "R", {d, g * h, h}));
  if (const TensorDesc* b = input(kRnnB)) {
    NDS_RETURN_IF_ERROR(CheckDType(op, *b, "B", {DType::kFp32}));
    NDS_RETURN_IF_ERROR(CheckShape(op, *b, "B", {d, 2 * g * h}));
  }
  if (const TensorDesc* lens = input(kRnnSequenceLens)) {
    NDS_RETURN_IF_ERROR(CheckDType(op, *lens, "sequence_lens", {DType::kInt32}));
    NDS_RETURN_IF_ERROR(CheckShape(op, *lens, "sequence_lens", {batch}));
  }
  const Shape state = a->layout == 0 ? Shape{d, batch, h} : Shape{batch, d, h};
  for (auto [position, name] :
       {std::pair{kRnnInitialH, "initial_h"}, std::pair{kRnnInitialC, "initial_c"}}) {
    if (const TensorDesc* s = input(position)) {
      NDS_RETURN_IF_ERROR(CheckDType(op, *s, name, {DType::kFp32}));
      NDS_RETURN_IF_ERROR(CheckShape(op, *s, name, state));
    }
  }
  if (const TensorDesc* p = input(kRnnP)) {
    NDS_RETURN_IF_ERROR(CheckDType(op, *p, "P", {DType::kFp32}));
    NDS_RETURN_IF_ERROR(CheckShape(op, *p, "P", {d, 3 * h}));
  }
  const Shape y = a->layout == 0 ? Shape{seq, d, batch, h} : Shape{batch, seq, d, h};
  Descs out = {{DType::kFp32, y}, {DType::kFp32, state}};
  if (MaxOutputs(op) == 3) out.push_back({DType::kFp32, state});
  return out;
}

}  // namespace rules
}  // namespace ndserve::kernels
