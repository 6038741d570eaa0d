#include "train/lstm_cell.h"

#include "base/status_macros.h"
#include "train/elementwise_ops.h"
#include "train/linear_ops.h"
#include "train/shape_ops.h"

namespace ndserve::train {

absl::StatusOr<LstmState> LstmCell(NDManager& scope, const Variable& x, const LstmState& state,
                                   const LstmWeights& w) {
  if (w.w_hh.shape().size() != 2 || w.w_hh.shape()[0] != 4 * w.w_hh.shape()[1]) {
    return absl::InvalidArgumentError("LstmCell: w_hh must be [4H, H]");
  }
  const std::int64_t hidden = w.w_hh.shape()[1];
  GemmOptions transposed;
  transposed.trans_b = true;
  NDS_ASSIGN_OR_RETURN(Variable xi, Gemm(scope, x, w.w_ih, w.b_ih, transposed));
  NDS_ASSIGN_OR_RETURN(Variable hh, Gemm(scope, state.h, w.w_hh, w.b_hh, transposed));
  NDS_ASSIGN_OR_RETURN(Variable gates, Add(scope, xi, hh));
  NDS_ASSIGN_OR_RETURN(Variable i_pre, Narrow(scope, gates, 1, 0, hidden));
  NDS_ASSIGN_OR_RETURN(Variable f_pre, Narrow(scope, gates, 1, hidden, hidden));
  NDS_ASSIGN_OR_RETURN(Variable g_pre, Narrow(scope, gates, 1, 2 * hidden, hidden));
  NDS_ASSIGN_OR_RETURN(Variable o_pre, Narrow(scope, gates, 1, 3 * hidden, hidden));
  NDS_ASSIGN_OR_RETURN(Variable i, Sigmoid(scope, i_pre));
  NDS_ASSIGN_OR_RETURN(Variable f, Sigmoid(scope, f_pre));
  NDS_ASSIGN_OR_RETURN(Variable g, Tanh(scope, g_pre));
  NDS_ASSIGN_OR_RETURN(Variable o, Sigmoid(scope, o_pre));
  NDS_ASSIGN_OR_RETURN(Variable fc, Mul(scope, f, state.c));
  NDS_ASSIGN_OR_RETURN(Variable ig, Mul(scope, i, g));
  LstmState next;
  NDS_ASSIGN_OR_RETURN(next.c, Add(scope, fc, ig));
  NDS_ASSIGN_OR_RETURN(Variable tc, Tanh(scope, next.c));
  NDS_ASSIGN_OR_RETURN(next.h, Mul(scope, o, tc));
  return next;
}

}  // namespace ndserve::train
