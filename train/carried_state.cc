#include "train/carried_state.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "train/array_helpers.h"
#include "train/compute.h"

namespace ndserve::train {

absl::StatusOr<CarriedState> CarriedState::Create(
    NDManager& trainer, absl::Span<const std::vector<std::int64_t>> shapes) {
  CarriedState state;
  for (const auto& shape : shapes) {
    NDS_ASSIGN_OR_RETURN(NDArray a, ZerosF32(trainer, shape));
    state.arrays_.push_back(std::move(a));
  }
  return state;
}

std::vector<Variable> CarriedState::Load() const {
  std::vector<Variable> out;
  for (const NDArray& a : arrays_) out.push_back(Variable::Constant(a));
  return out;
}

absl::Status CarriedState::Carry(absl::Span<const Variable> next) {
  if (next.size() != arrays_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("carried state has ", arrays_.size(),
                                                   " parts, got ", next.size()));
  }
  for (std::size_t i = 0; i < next.size(); ++i) {
    if (next[i].value().nbytes() != arrays_[i].nbytes()) {
      return absl::InvalidArgumentError(absl::StrCat("carried state part ", i, " is ",
                                                     arrays_[i].DebugString(), ", got ",
                                                     next[i].value().DebugString()));
    }
    UnchainBackward(next[i]);
    // A copy on the step's device (train/compute.h), queued like the step's kernels.
    NDS_RETURN_IF_ERROR(Axpy(1.0f, next[i].value(), arrays_[i], false));
  }
  return absl::OkStatus();
}

absl::Status CarriedState::Reset() {
  for (const NDArray& a : arrays_) NDS_RETURN_IF_ERROR(Fill(a, 0.0f));
  return absl::OkStatus();
}

}  // namespace ndserve::train
