#ifndef NDSERVE_TRAIN_CARRIED_STATE_H_
#define NDSERVE_TRAIN_CARRIED_STATE_H_

// Recurrent state carried from one step to the next for truncated BPTT: its value
// lives in the trainer manager (it must outlive the batch manager of the step that
// computed it), its history does not (UnchainBackward), so the graph never reaches
// back further than one step's time steps.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/nd_manager.h"
#include "train/variable.h"

namespace ndserve::train {

class CarriedState {
 public:
  // One zeroed FP32 array per shape, in `trainer`.
  static absl::StatusOr<CarriedState> Create(NDManager& trainer,
                                             absl::Span<const std::vector<std::int64_t>> shapes);

  // The state as constants for the next step's forward.
  std::vector<Variable> Load() const;
  // Cuts the history of `next` (the step's final state, one per shape) and copies its
  // values into the carried arrays. Call before the step's batch manager closes.
  absl::Status Carry(absl::Span<const Variable> next);
  // Back to zeros (a new sequence).
  absl::Status Reset();

 private:
  std::vector<NDArray> arrays_;
};

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_CARRIED_STATE_H_
