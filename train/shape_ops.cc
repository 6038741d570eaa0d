#include "train/shape_ops.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "train/cpu_math.h"

namespace ndserve::train {
namespace {

// A copy of x's elements under another shape, whose gradient is the output's gradient
// under x's shape.
absl::StatusOr<Variable> Reshaped(NDManager& scope, const Variable& x, const Dims& shape,
                                  const char* op) {
  NDS_ASSIGN_OR_RETURN(NDArray out, scope.Create(shape, x.value().dtype()));
  NDS_ASSIGN_OR_RETURN(void* dst, out.Data());
  NDS_ASSIGN_OR_RETURN(void* src, x.value().Data());
  if (out.nbytes() > 0) std::memcpy(dst, src, out.nbytes());
  auto creator = Record(op, {x}, [](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    NDS_ASSIGN_OR_RETURN(float* dst, F32(s.array));
    NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
    Store(dst, pg, g.num_elements(), s.accumulate);
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
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
  Dims out_shape(xs[0].shape().begin(), xs[0].shape().end());
  out_shape[axis] = 0;
  std::vector<std::int64_t> widths;  // inner block per input along the axis
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
    out_shape[axis] += x.shape()[axis];
  }
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
  for (std::size_t d = axis + 1; d < rank; ++d) inner *= out_shape[d];
  for (const Variable& x : xs) widths.push_back(x.shape()[axis] * inner);
  const std::int64_t row = out_shape[axis] * inner;
  NDS_ASSIGN_OR_RETURN(NDArray out, NewF32(scope, out_shape));
  NDS_ASSIGN_OR_RETURN(float* po, F32(out));
  std::int64_t col = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    NDS_ASSIGN_OR_RETURN(const float* px, F32(xs[i].value()));
    for (std::int64_t o = 0; o < outer; ++o) {
      std::copy(px + o * widths[i], px + (o + 1) * widths[i], po + o * row + col);
    }
    col += widths[i];
  }
  auto creator = Record("Concat", std::vector<Variable>(xs.begin(), xs.end()),
                        [widths, outer, row](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
    std::int64_t col = 0;
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::int64_t w = widths[i];
      if (ctx.NeedsGrad(static_cast<int>(i))) {
        NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(static_cast<int>(i)));
        NDS_ASSIGN_OR_RETURN(float* dst, F32(s.array));
        for (std::int64_t o = 0; o < outer; ++o) Store(dst + o * w, pg + o * row + col, w, s.accumulate);
      }
      col += w;
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
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= out_shape[d];
  for (std::size_t d = axis + 1; d < out_shape.size(); ++d) inner *= out_shape[d];
  const std::int64_t in_row = dim * inner, out_row = length * inner, off = start * inner;
  NDS_ASSIGN_OR_RETURN(NDArray out, NewF32(scope, out_shape));
  NDS_ASSIGN_OR_RETURN(float* po, F32(out));
  NDS_ASSIGN_OR_RETURN(const float* px, F32(x.value()));
  for (std::int64_t o = 0; o < outer; ++o) {
    std::copy(px + o * in_row + off, px + o * in_row + off + out_row, po + o * out_row);
  }
  auto creator = Record("Narrow", {x},
                        [outer, in_row, out_row, off](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    NDS_ASSIGN_OR_RETURN(float* dst, F32(s.array));
    NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
    if (!s.accumulate) std::fill(dst, dst + s.array.num_elements(), 0.0f);
    for (std::int64_t o = 0; o < outer; ++o) {
      Store(dst + o * in_row + off, pg + o * out_row, out_row, true);
    }
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

absl::StatusOr<Variable> Gather(NDManager& scope, const Variable& data, const Variable& indices,
                                std::int64_t axis) {
  NDS_ASSIGN_OR_RETURN(axis, NormAxis(axis, data.shape().size(), "Gather"));
  const NDArray& idx = indices.value();
  std::vector<std::int64_t> ids(static_cast<std::size_t>(idx.num_elements()));
  if (idx.dtype() == DType::kInt64) {
    NDS_ASSIGN_OR_RETURN(const std::int64_t* p, idx.DataAs<std::int64_t>());
    std::copy(p, p + ids.size(), ids.begin());
  } else if (idx.dtype() == DType::kInt32) {
    NDS_ASSIGN_OR_RETURN(const std::int32_t* p, idx.DataAs<std::int32_t>());
    std::copy(p, p + ids.size(), ids.begin());
  } else {
    return absl::InvalidArgumentError(absl::StrCat("Gather: indices ", idx.DebugString(),
                                                   " are not INT64 or INT32"));
  }
  const std::int64_t dim = data.shape()[axis];
  for (std::int64_t& id : ids) {
    if (id < -dim || id >= dim) {
      return absl::InvalidArgumentError(absl::StrCat("Gather: index ", id,
                                                     " out of range for axis of ", dim));
    }
    if (id < 0) id += dim;
  }
  Dims out_shape(data.shape().begin(), data.shape().begin() + axis);
  out_shape.insert(out_shape.end(), idx.shape().begin(), idx.shape().end());
  out_shape.insert(out_shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= data.shape()[d];
  for (std::size_t d = axis + 1; d < data.shape().size(); ++d) inner *= data.shape()[d];
  const std::size_t esize = DTypeSize(data.value().dtype());
  NDS_ASSIGN_OR_RETURN(NDArray out, scope.Create(out_shape, data.value().dtype()));
  NDS_ASSIGN_OR_RETURN(void* dst_raw, out.Data());
  NDS_ASSIGN_OR_RETURN(void* src_raw, data.value().Data());
  auto* dst = static_cast<std::uint8_t*>(dst_raw);
  const auto* src = static_cast<const std::uint8_t*>(src_raw);
  const std::size_t block = static_cast<std::size_t>(inner) * esize;
  const auto n_ids = static_cast<std::int64_t>(ids.size());
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < n_ids; ++i) {
      std::memcpy(dst + (o * n_ids + i) * block, src + (o * dim + ids[i]) * inner * esize, block);
    }
  }
  auto creator = Record("Gather", {data, indices},
                        [ids = std::move(ids), axis, outer, inner, dim](
                            BackwardContext& ctx, const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
    if (axis == 0) return ctx.AddRows(0, ids, pg, inner);
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    NDS_ASSIGN_OR_RETURN(float* d, F32(s.array));
    if (!s.accumulate) std::fill(d, d + s.array.num_elements(), 0.0f);
    const auto n_ids = static_cast<std::int64_t>(ids.size());
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t i = 0; i < n_ids; ++i) {
        Store(d + (o * dim + ids[i]) * inner, pg + (o * n_ids + i) * inner, inner, true);
      }
    }
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace ndserve::train
