// Gather along one axis with INT32 or INT64 indices. Every index is checked before any
// byte moves: negative indices count from the end, out-of-range ones are
// INVALID_ARGUMENT naming the index and its position.
#include <cstring>

#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

template <typename I>
absl::Status GatherRows(const TensorView& data, const TensorView& indices, const TensorView& out,
                        int64_t axis) {
  const AxisPlan p = MakeAxisPlan(data.shape, axis);
  const I* idx = indices.as<const I>();
  const int64_t count = indices.numel();
  for (int64_t j = 0; j < count; ++j) {
    const int64_t v = static_cast<int64_t>(idx[j]);
    if (v < -p.axis_dim || v >= p.axis_dim) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "Gather: index %d (indices[%d]) is out of range for axis %d of size %d (data %s)", v, j,
          axis, p.axis_dim, ShapeToString(data.shape)));
    }
  }
  const std::size_t row_bytes = static_cast<std::size_t>(p.inner) * DTypeSize(data.dtype);
  const auto* src = static_cast<const unsigned char*>(data.data);
  auto* dst = static_cast<unsigned char*>(out.data);
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      int64_t v = static_cast<int64_t>(idx[j]);
      if (v < 0) v += p.axis_dim;
      std::memcpy(dst + (o * count + j) * row_bytes, src + (o * p.axis_dim + v) * row_bytes,
                  row_bytes);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Gather(const KernelContext&, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const int64_t axis =
      *NormalizeAxis(std::get<GatherAttrs>(attrs).axis, in[0].shape.size(), "Gather");
  if (in[1].dtype == DType::kInt32) return GatherRows<int32_t>(in[0], in[1], out[0], axis);
  return GatherRows<int64_t>(in[0], in[1], out[0], axis);
}

}  // namespace ndserve::kernels::cpu
