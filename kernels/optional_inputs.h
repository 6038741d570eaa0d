#ifndef NDSERVE_KERNELS_OPTIONAL_INPUTS_H_
#define NDSERVE_KERNELS_OPTIONAL_INPUTS_H_

// Nodes that leave out an optional input before a present one. Exporters write LSTM as
// LSTM(X, W, R, B, "", initial_h, initial_c): sequence_lens absent, the states present.
// For the ops that accept this, the engine drops the absent inputs (kernels get the
// present ones, in ONNX order) and tells the rules which they were through the INT
// attribute kPresentInputsAttr; the rules fold it into the attribute struct so the kernel
// knows what each of its inputs is. Every other op keeps positional inputs, and the
// engine refuses such nodes for them.

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "kernels/op_kind.h"

namespace ndserve::kernels {

// Bit i set when the node's input i is present (has a name). No ONNX attribute has
// this name.
inline constexpr char kPresentInputsAttr[] = "ndserve.present_inputs";

// True for the ops whose rules read kPresentInputsAttr (LSTM, GRU, RNN).
bool AcceptsAbsentInputs(OpKind op);

// The kPresentInputsAttr value for a node's input names ("" marks an absent one).
int64_t PresentInputsMask(absl::Span<const std::string> inputs);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_OPTIONAL_INPUTS_H_
