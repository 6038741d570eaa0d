// GatherElements and ScatterElements on the CPU. Both first turn every index into the data
// element it names (ElementsOffsets), so a bad index is INVALID_ARGUMENT naming it before
// any byte moves. ScatterElements then starts from a copy of data and applies the updates
// in index order: a repeated target's last update wins (ONNX leaves that order open; it is
// PyTorch's and numpy's), and a reduction folds them in that order.
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/numeric_dispatch.h"
#include "kernels/cpu/strided_gather.h"  // ForElementSize
#include "kernels/elementwise_ops.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

// The data element each index reaches, in index order; negative indices count from the
// end of the axis.
template <typename I>
absl::StatusOr<std::vector<int64_t>> OffsetsOf(absl::string_view op, const ElementsPlan& p,
                                               const I* idx, ShapeSpan data) {
  const int64_t rank = static_cast<int64_t>(p.index_dims.size());
  std::vector<int64_t> offsets(p.count);
  std::vector<int64_t> coord(rank, 0);
  int64_t base = 0;  // the non-axis part of the current index's data offset
  for (int64_t i = 0; i < p.count; ++i) {
    int64_t v = static_cast<int64_t>(idx[i]);
    if (v < -p.axis_dim || v >= p.axis_dim) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: index %d (indices[%d]) is out of range for axis %d of size %d "
                          "(data %s)",
                          op, v, i, p.axis, p.axis_dim, ShapeToString(data)));
    }
    if (v < 0) v += p.axis_dim;
    offsets[i] = base + v * p.data_strides[p.axis];
    // Next coordinate of the indices, row-major; the axis's own coordinate adds nothing.
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t step = d == p.axis ? 0 : p.data_strides[d];
      if (++coord[d] < p.index_dims[d]) {
        base += step;
        break;
      }
      base -= step * (coord[d] - 1);
      coord[d] = 0;
    }
  }
  return offsets;
}

absl::StatusOr<std::vector<int64_t>> ElementsOffsets(absl::string_view op, const ElementsAttrs& a,
                                                     const TensorView& data,
                                                     const TensorView& indices) {
  const int64_t axis = *NormalizeAxis(a.axis, data.shape.size(), op);
  const ElementsPlan p = MakeElementsPlan(data.shape, indices.shape, axis);
  if (indices.dtype == DType::kInt32) {
    return OffsetsOf(op, p, indices.as<const int32_t>(), data.shape);
  }
  return OffsetsOf(op, p, indices.as<const int64_t>(), data.shape);
}

// dst[i] = src[offsets[i]] (gather) or dst[offsets[i]] = src[i] (scatter), for elements
// of `dtype`'s width.
void MoveElements(DType dtype, const std::vector<int64_t>& offsets, const void* src, void* dst,
                  bool gather) {
  ForElementSize(dtype, [&](auto tag) {
    using E = decltype(tag);
    const E* s = static_cast<const E*>(src);
    E* d = static_cast<E*>(dst);
    const int64_t n = static_cast<int64_t>(offsets.size());
    if (gather) {
      for (int64_t i = 0; i < n; ++i) d[i] = s[offsets[i]];
    } else {
      for (int64_t i = 0; i < n; ++i) d[offsets[i]] = s[i];
    }
  });
}

}  // namespace

absl::Status GatherElements(const KernelContext&, absl::Span<const TensorView> in,
                            absl::Span<const TensorView> out, const OpAttrs& attrs) {
  absl::StatusOr<std::vector<int64_t>> offsets =
      ElementsOffsets("GatherElements", std::get<ElementsAttrs>(attrs), in[0], in[1]);
  if (!offsets.ok()) return offsets.status();
  MoveElements(in[0].dtype, *offsets, in[0].data, out[0].data, /*gather=*/true);
  return absl::OkStatus();
}

absl::Status ScatterElements(const KernelContext&, absl::Span<const TensorView> in,
                             absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ElementsAttrs& a = std::get<ElementsAttrs>(attrs);
  absl::StatusOr<std::vector<int64_t>> offsets =
      ElementsOffsets("ScatterElements", a, in[0], in[1]);
  if (!offsets.ok()) return offsets.status();
  if (out[0].data != in[0].data && in[0].nbytes() > 0) {
    std::memcpy(out[0].data, in[0].data, in[0].nbytes());
  }
  if (a.reduction == ScatterReduction::kNone) {
    MoveElements(in[0].dtype, *offsets, in[2].data, out[0].data, /*gather=*/false);
    return absl::OkStatus();
  }
  return ForNumeric(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* u = in[2].as<const T>();
    T* y = out[0].as<T>();
    const int64_t n = static_cast<int64_t>(offsets->size());
    if (a.reduction == ScatterReduction::kAdd) {
      for (int64_t i = 0; i < n; ++i) y[(*offsets)[i]] = AddOp()(y[(*offsets)[i]], u[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) y[(*offsets)[i]] = MulOp()(y[(*offsets)[i]], u[i]);
    }
  });
}

}  // namespace ndserve::kernels::cpu
