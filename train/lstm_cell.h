#ifndef NDSERVE_TRAIN_LSTM_CELL_H_
#define NDSERVE_TRAIN_LSTM_CELL_H_

// One LSTM step built from the recorded ops (so its backward is theirs), with PyTorch's
// nn.LSTMCell layout: gates i, f, g, o stacked in the 4H rows of the weights.

#include "absl/status/statusor.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train {

struct LstmWeights {
  Variable w_ih;  // [4H, I]
  Variable w_hh;  // [4H, H]
  Variable b_ih;  // [4H]
  Variable b_hh;  // [4H]
};

struct LstmState {
  Variable h;  // [B, H]
  Variable c;  // [B, H]
};

// x [B, I] and the previous state -> the next state.
absl::StatusOr<LstmState> LstmCell(NDManager& scope, const Variable& x, const LstmState& state,
                                   const LstmWeights& weights);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_LSTM_CELL_H_
