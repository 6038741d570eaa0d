#ifndef NDSERVE_TRAIN_VARIABLE_H_
#define NDSERVE_TRAIN_VARIABLE_H_

// The autograd graph (docs/design.md §10): variables hold an array and, when an op made
// them from variables that need gradients, a link to the function node that made them.
// Values and temporary gradients live in the step's batch manager; a parameter's value
// and its gradient live in the trainer manager and are reused every step.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "memory/nd_array.h"
#include "memory/nd_manager.h"

namespace ndserve::train {

class BackwardContext;
struct FunctionNode;

// What a Variable handle names. Not used directly.
struct VariableState {
  NDArray value;
  // Parameters only: allocated once next to the value, zeroed by ClearGrad.
  NDArray grad;
  bool requires_grad = false;
  std::shared_ptr<FunctionNode> creator;
  // Rows of `grad` written since the last ClearGrad, while only row updates (Gather's
  // backward) wrote it; `dense_grad` once anything wrote the whole array. Lets ClearGrad
  // and SGD touch only those rows of an embedding table.
  std::vector<std::int64_t> touched_rows;
  // Whether touched_rows holds no repeats (DistinctTouchedRows made it so and no row was
  // added since), and one mark per row of the table for making it so.
  bool touched_distinct = true;
  std::vector<std::uint8_t> row_marks;
  bool dense_grad = false;
};

// The rows of a row-updated gradient written since the last ClearGrad, each once, in
// the order first written: the gradient norm and SGD read each row once (an id
// repeated in a batch adds into its row once per look-up, but the row is one). Made in
// place once per step, in time linear in the look-ups (a mark per table row, not a
// sort: a sort of every id was a fifth of a recsys step).
const std::vector<std::int64_t>& DistinctTouchedRows(VariableState& state);

// A handle to a value in the graph; copies share one state. A null handle is invalid.
class Variable {
 public:
  Variable() = default;
  // A value that needs no gradient (inputs, labels, frozen weights).
  static Variable Constant(NDArray value);
  // A trainable leaf: its gradient array (same shape, zeroed) is made in `scope` (the
  // trainer manager), once.
  static absl::StatusOr<Variable> Parameter(NDArray value, NDManager& scope);
  // An op's output; `creator` is null when no input needs a gradient.
  static Variable FromOp(NDArray value, std::shared_ptr<FunctionNode> creator);

  bool is_null() const { return state_ == nullptr; }
  const NDArray& value() const { return state_->value; }
  const NDArray& grad() const { return state_->grad; }
  bool requires_grad() const { return state_->requires_grad; }
  bool is_leaf() const { return state_->creator == nullptr; }
  const std::shared_ptr<FunctionNode>& creator() const { return state_->creator; }
  absl::Span<const std::int64_t> shape() const { return state_->value.shape(); }
  VariableState* state() const { return state_.get(); }
  bool Same(const Variable& other) const { return state_ == other.state_; }

 private:
  std::shared_ptr<VariableState> state_;
};

// A recorded op. `backward` reads the gradient of the op's output and hands the
// gradients of its inputs to the context.
struct FunctionNode {
  using BackwardFn = std::function<absl::Status(BackwardContext& ctx, const NDArray& grad_out)>;
  const char* op = "";
  std::vector<Variable> inputs;
  BackwardFn backward;
};

// Records `op` when any of `inputs` needs a gradient: the output's creator, or null.
std::shared_ptr<FunctionNode> Record(const char* op, std::vector<Variable> inputs,
                                     FunctionNode::BackwardFn backward);

// Where a backward writes the gradient of one input.
struct GradSlot {
  NDArray array;
  // Add to `array` (it holds earlier contributions) rather than overwrite it.
  bool accumulate = false;
};

// Handed to a node's backward: where its input gradients go. Non-leaf gradients are
// temporaries in `scope` (the batch manager); leaf gradients are the parameters' own
// arrays, accumulated in place.
class BackwardContext {
 public:
  virtual ~BackwardContext() = default;
  NDManager& scope() const { return *scope_; }
  const FunctionNode& node() const { return *node_; }
  // Whether input `i` wants a gradient at all.
  bool NeedsGrad(int i) const;
  // The array to write input i's gradient into (shape of the input).
  virtual absl::StatusOr<GradSlot> Slot(int i) = 0;
  // Hands over a gradient computed elsewhere (may be the output gradient itself); it is
  // not modified afterwards.
  virtual absl::Status Add(int i, const NDArray& grad) = 0;
  // Adds `rows` (FP32, [ids' count, row_len]) into rows `ids` (INT64, any shape; a
  // negative id counts from the end) of input i's gradient (an embedding table): only
  // those rows are touched, and with ids on the host only they are recorded as written.
  virtual absl::Status AddRows(int i, const NDArray& ids, const NDArray& rows,
                               std::int64_t row_len) = 0;

 protected:
  NDManager* scope_ = nullptr;
  const FunctionNode* node_ = nullptr;
};

// Back-propagates from `root` (a scalar, or with `root_grad` of its shape) through its
// recorded graph, accumulating into the parameters' gradients. Temporaries go to `scope`.
absl::Status Backward(const Variable& root, NDManager& scope, NDArray root_grad = NDArray());

// Zeroes the parameters' gradients in place (only the touched rows of row-updated ones).
absl::Status ClearGrad(absl::Span<const Variable> parameters);

// Cuts the creator links of `var` and, recursively, of everything it was made from: the
// values stay, the history goes (truncated BPTT).
void UnchainBackward(const Variable& var);

// Function nodes reachable from `var` (what UnchainBackward bounds).
std::int64_t GraphNodeCount(const Variable& var);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_VARIABLE_H_
