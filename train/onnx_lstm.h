#ifndef NDSERVE_TRAIN_ONNX_LSTM_H_
#define NDSERVE_TRAIN_ONNX_LSTM_H_

// A served graph's ONNX LSTM node replayed through the recorded ops (docs/design.md §10),
// so that RecordedGraph can train a recurrent model and truncated BPTT can carry its
// state: one cell per time step, unrolled, with ONNX's layout (gates i, o, f, c stacked
// in the 4H rows of W [1, 4H, I] and R [1, 4H, H]; B [1, 8H] is Wb then Rb).

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/attrs/rnn.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train {

struct OnnxLstmOutputs {
  Variable y;    // [T, 1, B, H]
  Variable y_h;  // [1, B, H]: the state after the last time step
  Variable y_c;  // [1, B, H]
};

// `in` are the node's present inputs in ONNX order (`attrs.present` says which: X, W, R
// and optionally B, initial_h, initial_c; absent states start at zero). UNIMPLEMENTED
// for what only the inference kernel does: other directions or layouts, clipping,
// sequence_lens, peepholes; INVALID_ARGUMENT for shapes that do not fit.
absl::StatusOr<OnnxLstmOutputs> OnnxLstm(NDManager& scope, const kernels::RecurrentAttrs& attrs,
                                         absl::Span<const Variable> in);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_ONNX_LSTM_H_
