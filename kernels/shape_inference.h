#ifndef NDSERVE_KERNELS_SHAPE_INFERENCE_H_
#define NDSERVE_KERNELS_SHAPE_INFERENCE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/op_attrs.h"
#include "kernels/op_kind.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels {

// Types and shapes of the outputs of `op` given its data inputs (shape-deciding inputs are
// in `attrs`, see op_attrs.h; absent optional inputs such as Gemm's C or
// LayerNormalization's B are simply not passed). The engine calls this to allocate outputs;
// every kernel call checks its outputs against it, so it is also the one place that decides
// what each op accepts: input count, dtypes with a kernel, rank and shape rules.
//
// Returns one entry per output the op can produce (LayerNormalization: Y, Mean,
// InvStdDev, of which a node may use a prefix; every other op: one). Errors are
// INVALID_ARGUMENT naming the op and the offending shapes, or UNIMPLEMENTED for a dtype
// no kernel supports. Pure function; thread-safe.
absl::StatusOr<std::vector<TensorDesc>> InferOutputs(OpKind op, absl::Span<const TensorDesc> inputs,
                                                     const OpAttrs& attrs);

// Normalized, de-duplicated-checked axes of a ReduceSum/ReduceMean over `rank` dims: all
// dims when `axes` is empty (and not noop_with_empty_axes), none for a no-op.
absl::StatusOr<std::vector<int64_t>> ResolveReduceAxes(const ReduceAttrs& attrs, int64_t rank,
                                                       absl::string_view op_name);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_SHAPE_INFERENCE_H_
