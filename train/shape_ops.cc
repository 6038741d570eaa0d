#include "train/shape_ops.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/train_kernels.h"
#include "train/compute.h"
#include "train/array_helpers.h"

namespace ndserve::train {
namespace {

// A copy of x's elements under another shape, whose gradient is the output's gradient
// under x's shape.
absl::StatusOr<Variable> Reshaped(NDManager& scope, const Variable& x, const Dims& shape,
                                  const char* op) {
  // The forward Reshape kernel copies any dtype (ids too) on the step's device.
  kernels::ReshapeAttrs attrs;
  attrs.shape = shape;
  attrs.allowzero = true;  // `shape` is resolved already: a 0 is an empty dim
  NDS_ASSIGN_OR_RETURN(NDArray out,
                       RunOp(scope, kernels::OpKind::kReshape, {View(x.value())}, attrs));
  auto creator = Record(op, {x}, [](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    return Axpy(1.0f, g, s.array, s.accumulate);
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

// dst (+)= src, where src is the gradient of one part of dst's input: written straight
// into dst when nothing is there yet, else made in the scope and added.
absl::Status SliceGradInto(BackwardContext& ctx, kernels::OpKind op, const NDArray& g,
                           const kernels::OpAttrs& attrs, const GradSlot& s) {
  if (!s.accumulate) return RunOp(ctx.scope(), op, {View(g)}, {View(s.array)}, attrs);
  NDS_ASSIGN_OR_RETURN(NDArray part, RunOp(ctx.scope(), op, {View(g)}, attrs));
  return Axpy(1.0f, part, s.array, true);
}

}  // namespace

absl::StatusOr<Variable> Reshape(NDManager& scope, const Variable& x,
                                 absl::Span<const std::int64_t> shape) {
  Dims out(shape.begin(), shape.end());
  int infer = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && i < x.shape().size()) out[i] = x.shape()[i];
    if (out[i] == -1) {
      if (infer >= 0) return absl::InvalidArgumentError("Reshape: more than one -1");
      infer = static_cast<int>(i);
    } else {
      known *= out[i];
    }
  }
  const std::int64_t n = x.value().num_elements();
  if (infer >= 0 && known > 0) out[static_cast<std::size_t>(infer)] = n / known;
  if (NumElements(out) != n) {
    return absl::InvalidArgumentError(absl::StrCat("Reshape: [", absl::StrJoin(x.shape(), ","),
                                                   "] cannot become [", absl::StrJoin(shape, ","), "]"));
  }
  return Reshaped(scope, x, out, "Reshape");
}

absl::StatusOr<Variable> Flatten(NDManager& scope, const Variable& x, std::int64_t axis) {
  const auto rank = static_cast<std::int64_t>(x.shape().size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) {
    return absl::InvalidArgumentError(absl::StrCat("Flatten: axis ", axis, " out of range"));
  }
  std::int64_t outer = 1;
  for (std::int64_t i = 0; i < axis; ++i) outer *= x.shape()[i];
  const std::int64_t n = x.value().num_elements();
  return Reshaped(scope, x, Dims{outer, outer == 0 ? 0 : n / outer}, "Flatten");
}

absl::StatusOr<Variable> Concat(NDManager& scope, absl::Span<const Variable> xs,
                                std::int64_t axis) {
  if (xs.empty()) return absl::InvalidArgumentError("Concat of nothing");
  const auto rank = xs[0].shape().size();
  NDS_ASSIGN_OR_RETURN(axis, NormAxis(axis, rank, "Concat"));
  for (const Variable& x : xs) {
    bool ok = x.shape().size() == rank && x.value().dtype() == DType::kFp32;
    for (std::size_t d = 0; ok && d < rank; ++d) {
      ok = static_cast<std::int64_t>(d) == axis || x.shape()[d] == xs[0].shape()[d];
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("Concat: input [", absl::StrJoin(x.shape(), ","),
                                                     "] does not match [", absl::StrJoin(xs[0].shape(), ","),
                                                     "] off axis ", axis));
    }
  }
  std::vector<kernels::TensorView> views;
  std::vector<std::int64_t> lengths;  // each input's extent along the axis
  for (const Variable& x : xs) {
    views.push_back(View(x.value()));
    lengths.push_back(x.shape()[axis]);
  }
  kernels::ConcatAttrs attrs;
  attrs.axis = axis;
  NDS_ASSIGN_OR_RETURN(NDArray out, RunOp(scope, kernels::OpKind::kConcat, views, attrs));
  // Input i's gradient is the output gradient's slice along the axis where i went.
  auto creator = Record("Concat", std::vector<Variable>(xs.begin(), xs.end()),
                        [lengths, axis](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    std::int64_t start = 0;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      if (ctx.NeedsGrad(static_cast<int>(i))) {
        NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(static_cast<int>(i)));
        kernels::SliceAttrs slice;
        slice.starts = {start};
        slice.ends = {start + lengths[i]};
        slice.axes = {axis};
        NDS_RETURN_IF_ERROR(SliceGradInto(ctx, kernels::OpKind::kSlice, g, slice, s));
      }
      start += lengths[i];
    }
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

absl::StatusOr<Variable> Narrow(NDManager& scope, const Variable& x, std::int64_t axis,
                                std::int64_t start, std::int64_t length) {
  NDS_ASSIGN_OR_RETURN(axis, NormAxis(axis, x.shape().size(), "Narrow"));
  const std::int64_t dim = x.shape()[axis];
  if (start < 0 || length < 0 || start + length > dim) {
    return absl::InvalidArgumentError(absl::StrCat("Narrow: [", start, ", ", start + length,
                                                   ") outside axis of ", dim));
  }
  Dims out_shape(x.shape().begin(), x.shape().end());
  out_shape[axis] = length;
  kernels::SliceAttrs slice;
  slice.starts = {start};
  slice.ends = {start + length};
  slice.axes = {axis};
  NDS_ASSIGN_OR_RETURN(NDArray out, RunOp(scope, kernels::OpKind::kSlice, {View(x.value())}, slice));
  // The gradient is the output's, padded with zeros back to the input's extent.
  kernels::PadAttrs pad;
  pad.pads.assign(2 * out_shape.size(), 0);
  pad.pads[static_cast<std::size_t>(axis)] = start;
  pad.pads[out_shape.size() + static_cast<std::size_t>(axis)] = dim - start - length;
  pad.value = kernels::ScalarValue{true, 0.0, 0};
  auto creator = Record("Narrow", {x}, [pad](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    return SliceGradInto(ctx, kernels::OpKind::kPad, g, pad, s);
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

absl::StatusOr<Variable> Gather(NDManager& scope, const Variable& data, const Variable& indices,
                                std::int64_t axis) {
  NDS_ASSIGN_OR_RETURN(axis, NormAxis(axis, data.shape().size(), "Gather"));
  const NDArray& idx = indices.value();
  if (idx.dtype() != DType::kInt64 && idx.dtype() != DType::kInt32) {
    return absl::InvalidArgumentError(absl::StrCat("Gather: indices ", idx.DebugString(),
                                                   " are not INT64 or INT32"));
  }
  // The forward kernel refuses an index out of range (on CUDA through the context's
  // error flag, which the step reads before it updates anything).
  kernels::GatherAttrs attrs;
  attrs.axis = axis;
  NDS_ASSIGN_OR_RETURN(NDArray out,
                       RunOp(scope, kernels::OpKind::kGather, {View(data.value()), View(idx)}, attrs));
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= data.shape()[d];
  for (std::size_t d = axis + 1; d < data.shape().size(); ++d) inner *= data.shape()[d];
  const std::int64_t dim = data.shape()[axis];
  auto creator = Record("Gather", {data, indices},
                        [axis, outer, inner, dim](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    // The table's row scatter wants INT64 ids.
    NDArray ids = ctx.node().inputs[1].value();
    if (ids.dtype() != DType::kInt64) {
      kernels::CastAttrs cast;
      cast.to = DType::kInt64;
      NDS_ASSIGN_OR_RETURN(ids, RunOp(ctx.scope(), kernels::OpKind::kCast, {View(ids)}, cast));
    }
    if (axis == 0) return ctx.AddRows(0, ids, g, inner);
    // Along an inner axis each outer block of the input is a table of `dim` rows.
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    if (!s.accumulate) {
      NDS_RETURN_IF_ERROR(Fill(s.array, 0.0f));
    }
    NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math, MathFor({&g, &ids, &s.array}));
    NDS_ASSIGN_OR_RETURN(const std::int64_t* pi, ids.DataAs<std::int64_t>());
    NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
    NDS_ASSIGN_OR_RETURN(float* d, F32(s.array));
    const std::int64_t n_ids = ids.num_elements();
    for (std::int64_t o = 0; o < outer; ++o) {
      NDS_RETURN_IF_ERROR(math->add_rows(CurrentContext(), pi, n_ids, pg + o * n_ids * inner,
                                         inner, d + o * dim * inner, dim));
    }
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace ndserve::train
