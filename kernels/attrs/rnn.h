#ifndef NDSERVE_KERNELS_ATTRS_RNN_H_
#define NDSERVE_KERNELS_ATTRS_RNN_H_

// Attribute structs of the recurrent ops (LSTM, GRU, RNN) and Einsum.
// Plain values; see op_attrs.h for the conventions.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memory/dtype.h"

namespace ndserve::kernels {

enum class RnnDirection : uint8_t { kForward, kReverse, kBidirectional };

// Positions of the recurrent ops' inputs in the ONNX node (LSTM uses all eight, GRU and
// RNN the first six).
enum RnnInput : int {
  kRnnX = 0,
  kRnnW = 1,
  kRnnR = 2,
  kRnnB = 3,
  kRnnSequenceLens = 4,
  kRnnInitialH = 5,
  kRnnInitialC = 6,
  kRnnP = 7,
};
inline constexpr int kRnnMaxInputs = 8;

// LSTM, GRU and RNN. Activations are the ONNX defaults (LSTM Sigmoid/Tanh/Tanh, GRU
// Sigmoid/Tanh, RNN Tanh); the rules refuse anything else. `layout` 0 is time-major
// (X [seq, batch, input]), 1 batch-major (X [batch, seq, input]).
struct RecurrentAttrs {
  RnnDirection direction = RnnDirection::kForward;
  int64_t hidden_size = 0;
  int64_t layout = 0;
  float clip = 0.0f;  // bounds gate pre-activations to [-clip, clip]; 0 means no clipping
  bool linear_before_reset = false;  // GRU only
  // Bit i: ONNX input i is present. The default, every bit, reads the inputs a kernel is
  // given as a prefix of the ONNX inputs (X, W, R, then B, ... as far as they go).
  uint32_t present = ~0u;

  int num_directions() const { return direction == RnnDirection::kBidirectional ? 2 : 1; }

  // For each ONNX position, the index of that input among the `num_inputs` the kernel
  // gets, or -1 when it is absent.
  std::array<int, kRnnMaxInputs> Slots(std::size_t num_inputs) const {
    std::array<int, kRnnMaxInputs> slots;
    int next = 0;
    for (int i = 0; i < kRnnMaxInputs; ++i) {
      const bool here = ((present >> i) & 1u) != 0 && next < static_cast<int>(num_inputs);
      slots[i] = here ? next++ : -1;
    }
    return slots;
  }
};

// Einsum, parsed: one letter string per operand and the output's (explicit, or ONNX's
// implicit one: the letters used once, alphabetically). Ellipses and letters repeated
// within one operand are refused by the rules.
struct EinsumAttrs {
  std::string equation;  // as written, for messages
  std::vector<std::string> inputs;
  std::string output;
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ATTRS_RNN_H_
