#ifndef NDSERVE_KERNELS_RNN_PLAN_H_
#define NDSERVE_KERNELS_RNN_PLAN_H_

// What the LSTM, GRU and RNN kernels of both devices share: sizes and the operands by
// role, resolved from a validated call (the present inputs in ONNX order, see
// RecurrentAttrs::Slots) and the element offsets of the layout-dependent tensors.
// A plain value that owns nothing.

#include <cstdint>

#include "absl/types/span.h"
#include "kernels/op_attrs.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels {

enum class RnnCell : uint8_t { kLstm, kGru, kRnn };

struct RnnPlan {
  RnnCell cell = RnnCell::kRnn;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1;
  bool batch_major = false;   // layout 1
  bool reverse_only = false;  // direction "reverse": the only direction runs backwards
  bool linear_before_reset = false;
  float clip = 0.0f;
  // Operands; null for absent optional inputs and for outputs the caller did not ask for.
  const float* x = nullptr;
  const float* w = nullptr;
  const float* r = nullptr;
  const float* b = nullptr;
  const int32_t* lens = nullptr;
  const float* initial_h = nullptr;
  const float* initial_c = nullptr;
  const float* p = nullptr;
  float* y = nullptr;
  float* y_h = nullptr;
  float* y_c = nullptr;

  // Direction `dir` runs backwards in time.
  bool Reverse(int64_t dir) const { return reverse_only || dir == 1; }
  // Row of X (as a [seq * batch, input] matrix) holding step t of batch entry b.
  int64_t XRow(int64_t t, int64_t b) const { return batch_major ? b * seq + t : t * batch + b; }
  // Offset of Y's [hidden] vector for step t, direction dir, batch entry b.
  int64_t YOffset(int64_t t, int64_t dir, int64_t b) const {
    return (batch_major ? (b * seq + t) * dirs + dir : (t * dirs + dir) * batch + b) * hidden;
  }
  // Offset of a state's (initial_h, Y_h, ...) [hidden] vector for dir and b.
  int64_t StateOffset(int64_t dir, int64_t b) const {
    return (batch_major ? b * dirs + dir : dir * batch + b) * hidden;
  }
};

inline RnnPlan MakeRnnPlan(RnnCell cell, const RecurrentAttrs& a, absl::Span<const TensorView> in,
                           absl::Span<const TensorView> out) {
  RnnPlan p;
  p.cell = cell;
  p.gates = cell == RnnCell::kLstm ? 4 : cell == RnnCell::kGru ? 3 : 1;
  p.batch_major = a.layout == 1;
  p.seq = p.batch_major ? in[0].shape[1] : in[0].shape[0];
  p.batch = p.batch_major ? in[0].shape[0] : in[0].shape[1];
  p.input = in[0].shape[2];
  p.hidden = a.hidden_size;
  p.dirs = a.num_directions();
  p.reverse_only = a.direction == RnnDirection::kReverse;
  p.linear_before_reset = a.linear_before_reset;
  p.clip = a.clip;
  const std::array<int, kRnnMaxInputs> slot = a.Slots(in.size());
  auto f = [&](int position) -> const float* {
    return slot[position] < 0 ? nullptr : in[slot[position]].as<const float>();
  };
  p.x = f(kRnnX);
  p.w = f(kRnnW);
  p.r = f(kRnnR);
  p.b = f(kRnnB);
  p.lens = slot[kRnnSequenceLens] < 0 ? nullptr : in[slot[kRnnSequenceLens]].as<const int32_t>();
  p.initial_h = f(kRnnInitialH);
  if (cell == RnnCell::kLstm) {
    p.initial_c = f(kRnnInitialC);
    p.p = f(kRnnP);
  }
  p.y = out[0].as<float>();
  if (out.size() > 1) p.y_h = out[1].as<float>();
  if (out.size() > 2) p.y_c = out[2].as<float>();
  return p;
}

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_RNN_PLAN_H_
