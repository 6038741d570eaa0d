#ifndef NDSERVE_TRAIN_COMPUTE_H_
#define NDSERVE_TRAIN_COMPUTE_H_

// Where train/'s ops run (docs/design.md §10.2). A training step makes its device's
// kernel context current on its thread (ComputeScope), as PyTorch keeps a current CUDA
// stream; every op then runs its forward through the forward kernels
// (kernels/dispatch.h) and its backward through the training table
// (kernels/train_kernels.h) on that context. So a step on the CPU and a step on a GPU
// are one code path that differs only in the tables, and the CPU tests (PyTorch parity,
// finite differences) cover the path a CUDA session takes. Without a scope the context
// is the CPU's.
//
// On CUDA every call here only queues work on the context's stream: nothing reads an
// array's elements on the host. The step synchronizes before it reads the loss and
// before its batch scope frees the arrays the queued kernels use.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/kernel_context.h"
#include "kernels/op_attrs.h"
#include "kernels/op_kind.h"
#include "kernels/tensor_view.h"
#include "kernels/train_kernels.h"
#include "memory/nd_array.h"
#include "memory/nd_manager.h"

namespace ndserve::train {

// Makes `ctx` the thread's current context until destroyed (scopes nest). `ctx` must
// outlive the scope.
class ComputeScope {
 public:
  explicit ComputeScope(const kernels::KernelContext& ctx);
  ~ComputeScope();
  ComputeScope(const ComputeScope&) = delete;
  ComputeScope& operator=(const ComputeScope&) = delete;

 private:
  const kernels::KernelContext* previous_;
};

// The innermost ComputeScope's context on this thread, or the CPU's.
const kernels::KernelContext& CurrentContext();

// The training table of the current context's device. FAILED_PRECONDITION naming both
// devices when an array is on another device (a CUDA array in a CPU step, or the reverse).
absl::StatusOr<const kernels::TrainKernels*> MathFor(std::initializer_list<const NDArray*> arrays);

// A view of an array's elements, under its own shape or another of the same count.
kernels::TensorView View(const NDArray& array);
kernels::TensorView View(const NDArray& array, absl::Span<const std::int64_t> shape);

// Runs the forward kernel of `op` on the current context into preallocated outputs; the
// kernel's working space comes from `scope` (the step's batch manager).
absl::Status RunOp(NDManager& scope, kernels::OpKind op, absl::Span<const kernels::TensorView> in,
                   absl::Span<const kernels::TensorView> out, const kernels::OpAttrs& attrs);
// The same with the op's first output made in `scope` with the type and shape shape
// inference gives.
absl::StatusOr<NDArray> RunOp(NDManager& scope, kernels::OpKind op,
                              absl::Span<const kernels::TensorView> in,
                              const kernels::OpAttrs& attrs = kernels::NoAttrs{});

// dst[i] = value, for an FP32 array.
absl::Status Fill(const NDArray& dst, float value);
// dst (+)= alpha src over the arrays' elements (FP32, the same count).
absl::Status Axpy(float alpha, const NDArray& src, const NDArray& dst, bool accumulate);
// dst (+)= alpha times `full` summed down to dst's shape `in_shape`, which broadcasts
// to full's shape (a broadcast operand's gradient). Temporaries go to `scope`.
absl::Status AddReduced(NDManager& scope, float alpha, const NDArray& full,
                        absl::Span<const std::int64_t> in_shape, const NDArray& dst,
                        bool accumulate);

}  // namespace ndserve::train

#endif  // NDSERVE_TRAIN_COMPUTE_H_
