#include "train/carried_state.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "train/cpu_math.h"

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
    NDS_ASSIGN_OR_RETURN(void* dst, arrays_[i].Data());
    NDS_ASSIGN_OR_RETURN(void* src, next[i].value().Data());
    if (dst != src) std::memcpy(dst, src, arrays_[i].nbytes());
  }
  return absl::OkStatus();
}

absl::Status CarriedState::Reset() {
  for (const NDArray& a : arrays_) {
    NDS_ASSIGN_OR_RETURN(void* dst, a.Data());
    std::memset(dst, 0, a.nbytes());
  }
  return absl::OkStatus();
}

}  // namespace ndserve::train
