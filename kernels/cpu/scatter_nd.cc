// ScatterND on the CPU: the output starts as a copy of data, then each index tuple's
// slice is replaced by (or, with a reduction, combined with) its updates, in tuple order,
// so a repeated tuple's last update wins (ONNX leaves that order open; this is numpy's).
// Every tuple is checked before anything is written.
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/numeric_dispatch.h"
#include "kernels/elementwise_ops.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

// Each tuple's first slice element, in elements of data; negative coordinates count from
// the end of their dim.
absl::StatusOr<std::vector<int64_t>> SliceOffsets(const ScatterNDPlan& p, const int64_t* idx,
                                                  ShapeSpan data) {
  std::vector<int64_t> offsets(p.tuples);
  for (int64_t t = 0; t < p.tuples; ++t) {
    int64_t slices = 0;
    for (int64_t i = 0; i < p.k; ++i) {
      int64_t v = idx[t * p.k + i];
      if (v < -p.dims[i] || v >= p.dims[i]) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "ScatterND: index %d (tuple %d, coordinate %d) is out of range for dim %d of size "
            "%d (data %s)",
            v, t, i, i, p.dims[i], ShapeToString(data)));
      }
      if (v < 0) v += p.dims[i];
      slices += v * p.slice_strides[i];
    }
    offsets[t] = slices * p.slice;
  }
  return offsets;
}

template <typename T, typename Op>
void Combine(const T* updates, const std::vector<int64_t>& offsets, int64_t slice, T* y, Op op) {
  for (std::size_t t = 0; t < offsets.size(); ++t) {
    T* dst = y + offsets[t];
    const T* src = updates + static_cast<int64_t>(t) * slice;
    for (int64_t j = 0; j < slice; ++j) dst[j] = op(dst[j], src[j]);
  }
}

}  // namespace

absl::Status ScatterND(const KernelContext&, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ScatterReduction reduction = std::get<ScatterNDAttrs>(attrs).reduction;
  const ScatterNDPlan p = MakeScatterNDPlan(in[0].shape, in[1].shape);
  absl::StatusOr<std::vector<int64_t>> offsets =
      SliceOffsets(p, in[1].as<const int64_t>(), in[0].shape);
  if (!offsets.ok()) return offsets.status();
  if (out[0].data != in[0].data && in[0].nbytes() > 0) {
    std::memcpy(out[0].data, in[0].data, in[0].nbytes());
  }
  if (reduction == ScatterReduction::kNone) {
    const std::size_t bytes = static_cast<std::size_t>(p.slice) * DTypeSize(in[0].dtype);
    const auto* src = static_cast<const unsigned char*>(in[2].data);
    auto* dst = static_cast<unsigned char*>(out[0].data);
    for (int64_t t = 0; t < p.tuples; ++t) {
      std::memcpy(dst + (*offsets)[t] * DTypeSize(in[0].dtype), src + t * bytes, bytes);
    }
    return absl::OkStatus();
  }
  return ForNumeric(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (reduction == ScatterReduction::kAdd) {
      Combine(in[2].as<const T>(), *offsets, p.slice, out[0].as<T>(), AddOp());
    } else {
      Combine(in[2].as<const T>(), *offsets, p.slice, out[0].as<T>(), MulOp());
    }
  });
}

}  // namespace ndserve::kernels::cpu
