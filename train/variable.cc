#include "train/variable.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/train_kernels.h"
#include "train/compute.h"
#include "train/array_helpers.h"

namespace ndserve::train {

Variable Variable::Constant(NDArray value) {
  Variable v;
  v.state_ = std::make_shared<VariableState>();
  v.state_->value = std::move(value);
  return v;
}

absl::StatusOr<Variable> Variable::Parameter(NDArray value, NDManager& scope) {
  if (value.dtype() != DType::kFp32) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter ", value.DebugString(), " is not FP32"));
  }
  Variable v = Constant(std::move(value));
  NDS_ASSIGN_OR_RETURN(v.state_->grad, ZerosF32(scope, v.state_->value.shape()));
  v.state_->requires_grad = true;
  return v;
}

Variable Variable::FromOp(NDArray value, std::shared_ptr<FunctionNode> creator) {
  Variable v = Constant(std::move(value));
  v.state_->requires_grad = creator != nullptr;
  v.state_->creator = std::move(creator);
  return v;
}

std::shared_ptr<FunctionNode> Record(const char* op, std::vector<Variable> inputs,
                                     FunctionNode::BackwardFn backward) {
  bool any = false;
  for (const Variable& v : inputs) any = any || v.requires_grad();
  if (!any) return nullptr;
  auto node = std::make_shared<FunctionNode>();
  node->op = op;
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  return node;
}

const std::vector<std::int64_t>& DistinctTouchedRows(VariableState& state) {
  std::vector<std::int64_t>& rows = state.touched_rows;
  if (state.touched_distinct) return rows;
  const std::size_t table_rows =
      state.grad.rank() >= 1 ? static_cast<std::size_t>(state.grad.shape()[0]) : 0;
  std::vector<std::uint8_t>& marks = state.row_marks;
  if (marks.size() != table_rows) marks.assign(table_rows, 0);
  std::size_t kept = 0;
  for (const std::int64_t r : rows) {
    std::uint8_t& mark = marks[static_cast<std::size_t>(r)];
    if (mark == 0) {
      mark = 1;
      rows[kept++] = r;
    }
  }
  rows.resize(kept);
  for (const std::int64_t r : rows) marks[static_cast<std::size_t>(r)] = 0;
  state.touched_distinct = true;
  return rows;
}

bool BackwardContext::NeedsGrad(int i) const {
  return node_->inputs[static_cast<std::size_t>(i)].requires_grad();
}

namespace {

// One pass of Backward: the gradients of the non-leaf variables seen so far.
class BackwardPass final : public BackwardContext {
 public:
  explicit BackwardPass(NDManager& scope) { scope_ = &scope; }

  struct Entry {
    NDArray grad;
    bool owned = false;  // made by this pass, so it may be added to in place
  };

  void Begin(const FunctionNode& node) { node_ = &node; }
  absl::flat_hash_map<VariableState*, Entry>& grads() { return grads_; }

  absl::StatusOr<GradSlot> Slot(int i) override {
    VariableState* s = Input(i);
    if (s->creator == nullptr) {
      s->dense_grad = true;
      return GradSlot{s->grad, true};
    }
    auto it = grads_.find(s);
    if (it == grads_.end()) {
      NDS_ASSIGN_OR_RETURN(NDArray fresh, NewF32(*scope_, s->value.shape()));
      grads_[s] = Entry{fresh, true};
      return GradSlot{fresh, false};
    }
    NDS_RETURN_IF_ERROR(Own(it->second));
    return GradSlot{it->second.grad, true};
  }

  absl::Status Add(int i, const NDArray& grad) override {
    VariableState* s = Input(i);
    if (s->creator == nullptr) {
      s->dense_grad = true;
      return Axpy(1.0f, grad, s->grad, true);
    }
    auto it = grads_.find(s);
    if (it == grads_.end()) {
      grads_[s] = Entry{grad, false};
      return absl::OkStatus();
    }
    NDS_RETURN_IF_ERROR(Own(it->second));
    return Axpy(1.0f, grad, it->second.grad, true);
  }

  absl::Status AddRows(int i, const NDArray& ids, const NDArray& rows,
                       std::int64_t row_len) override {
    VariableState* s = Input(i);
    const NDArray& table = s->value;
    const std::int64_t table_rows = row_len == 0 ? 0 : table.num_elements() / row_len;
    NDArray dst;
    if (s->creator == nullptr) {
      dst = s->grad;
      if (ids.device().is_cuda() || s->grad.device().is_cuda()) {
        // The ids stay on the device, so the rows they touch are not known here: the
        // whole table's gradient counts as written (ClearGrad zeroes all of it, and
        // plain SGD moves every row, by zero where nothing was added). Rows are recorded
        // only for a host gradient, so ClearGrad, the row-sparse SGD and the norm, which
        // hand the host list of rows to the kernels, never pair it with device memory
        // (host ids against a device table are refused below, after this).
        s->dense_grad = true;
      } else if (!s->dense_grad) {
        NDS_ASSIGN_OR_RETURN(const std::int64_t* p, ids.DataAs<std::int64_t>());
        for (std::int64_t k = 0; k < ids.num_elements(); ++k) {
          // Out-of-range ids are refused by the scatter below; negative ones count from
          // the end, as Gather read them.
          if (p[k] >= -table_rows && p[k] < table_rows) {
            s->touched_rows.push_back(p[k] < 0 ? p[k] + table_rows : p[k]);
          }
          s->touched_distinct = false;
        }
      }
    } else {
      NDS_ASSIGN_OR_RETURN(GradSlot slot, Slot(i));
      dst = slot.array;
      if (!slot.accumulate) {
        NDS_RETURN_IF_ERROR(Fill(dst, 0.0f));
      }
    }
    // The scatter is the training math table's (kernels/train_kernels.h), which refuses a
    // row outside the table.
    NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&ids, &rows, &dst}));
    NDS_ASSIGN_OR_RETURN(const std::int64_t* pi, ids.DataAs<std::int64_t>());
    NDS_ASSIGN_OR_RETURN(const float* pr, F32(rows));
    NDS_ASSIGN_OR_RETURN(float* pd, F32(dst));
    return math->add_rows(CurrentContext(), pi, ids.num_elements(), pr, row_len, pd, table_rows);
  }

 private:
  VariableState* Input(int i) const { return node_->inputs[static_cast<std::size_t>(i)].state(); }

  // A gradient handed over by Add may be another variable's: copy before adding to it.
  absl::Status Own(Entry& entry) {
    if (entry.owned) return absl::OkStatus();
    NDS_ASSIGN_OR_RETURN(NDArray copy, NewF32(*scope_, entry.grad.shape()));
    NDS_RETURN_IF_ERROR(Axpy(1.0f, entry.grad, copy, false));
    entry = Entry{copy, true};
    return absl::OkStatus();
  }

  absl::flat_hash_map<VariableState*, Entry> grads_;
};

// The variables with creators reachable from `root`, each after every variable made
// from it (reverse topological order), without recursion (graphs of long unrolled
// sequences are deep).
std::vector<VariableState*> Order(VariableState* root) {
  std::vector<VariableState*> post;
  absl::flat_hash_set<VariableState*> seen;
  std::vector<std::pair<VariableState*, std::size_t>> stack;
  if (root->creator == nullptr) return post;
  stack.emplace_back(root, 0);
  seen.insert(root);
  while (!stack.empty()) {
    auto& [s, next] = stack.back();
    const auto& inputs = s->creator->inputs;
    if (next < inputs.size()) {
      VariableState* in = inputs[next++].state();
      if (in->creator != nullptr && seen.insert(in).second) stack.emplace_back(in, 0);
      continue;
    }
    post.push_back(s);
    stack.pop_back();
  }
  std::reverse(post.begin(), post.end());
  return post;
}

}  // namespace

absl::Status Backward(const Variable& root, NDManager& scope, NDArray root_grad) {
  if (root.is_null() || !root.requires_grad()) {
    return absl::InvalidArgumentError("backward from a variable that needs no gradient");
  }
  if (root_grad.is_null()) {
    if (root.value().num_elements() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backward from non-scalar ", root.value().DebugString(), " needs its gradient"));
    }
    NDS_ASSIGN_OR_RETURN(root_grad, NewF32(scope, root.shape()));
    NDS_RETURN_IF_ERROR(Fill(root_grad, 1.0f));
  }
  if (root.is_leaf()) return Axpy(1.0f, root_grad, root.grad(), true);
  BackwardPass pass(scope);
  pass.grads()[root.state()] = BackwardPass::Entry{root_grad, false};
  for (VariableState* s : Order(root.state())) {
    auto it = pass.grads().find(s);
    if (it == pass.grads().end()) continue;  // nothing flowed into it
    const NDArray grad = it->second.grad;
    pass.grads().erase(it);
    const FunctionNode& node = *s->creator;
    pass.Begin(node);
    absl::Status status = node.backward(pass, grad);
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat("backward of ", node.op, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ClearGrad(absl::Span<const Variable> parameters) {
  for (const Variable& p : parameters) {
    VariableState* s = p.state();
    if (s == nullptr || s->grad.is_null()) continue;
    if (s->dense_grad) {
      NDS_RETURN_IF_ERROR(Fill(s->grad, 0.0f));
    } else if (!s->touched_rows.empty()) {
      // Rows are recorded only for ids on the host (AddRows), so the gradient is too.
      NDS_ASSIGN_OR_RETURN(float* g, F32(s->grad));
      const std::int64_t row_len = RowWidth(s->grad);
      for (std::int64_t r : DistinctTouchedRows(*s)) std::fill(g + r * row_len, g + (r + 1) * row_len, 0.0f);
    }
    s->touched_rows.clear();
    s->touched_distinct = true;
    s->dense_grad = false;
  }
  return absl::OkStatus();
}

void UnchainBackward(const Variable& var) {
  if (var.is_null()) return;
  std::vector<std::shared_ptr<FunctionNode>> pending;
  if (var.creator() != nullptr) pending.push_back(std::move(var.state()->creator));
  var.state()->creator = nullptr;
  while (!pending.empty()) {
    std::shared_ptr<FunctionNode> node = std::move(pending.back());
    pending.pop_back();
    for (Variable& in : node->inputs) {
      if (in.state()->creator != nullptr) pending.push_back(std::move(in.state()->creator));
      in.state()->creator = nullptr;
    }
    node->inputs.clear();
    node->backward = nullptr;
  }
  // The value stays; it needs no gradient any more unless it is a parameter.
  var.state()->requires_grad = !var.state()->grad.is_null();
}

std::int64_t GraphNodeCount(const Variable& var) {
  if (var.is_null() || var.creator() == nullptr) return 0;
  absl::flat_hash_set<const FunctionNode*> seen;
  std::vector<const FunctionNode*> stack{var.creator().get()};
  seen.insert(stack.back());
  while (!stack.empty()) {
    const FunctionNode* node = stack.back();
    stack.pop_back();
    for (const Variable& in : node->inputs) {
      const FunctionNode* c = in.creator().get();
      if (c != nullptr && seen.insert(c).second) stack.push_back(c);
    }
  }
  return static_cast<std::int64_t>(seen.size());
}

}  // namespace ndserve::train
