// Gather along one axis with INT32 or INT64 indices, and the fused embedding bag
// (GatherAttrs::bag_mean). Every index is checked before any byte moves: negative
// indices count from the end, out-of-range ones are INVALID_ARGUMENT naming the index
// and its position.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

// Index `v` at position `j` of the indices is outside axis `axis` (size `axis_dim`).
absl::Status OutOfRange(int64_t v, int64_t j, int64_t axis, int64_t axis_dim,
                        const TensorView& data) {
  return absl::InvalidArgumentError(
      absl::StrFormat("Gather: index %d (indices[%d]) is out of range for axis %d of size %d "
                      "(data %s)",
                      v, j, axis, axis_dim, ShapeToString(data.shape)));
}

template <typename I>
absl::Status GatherRows(const TensorView& data, const TensorView& indices, const TensorView& out,
                        int64_t axis) {
  const AxisPlan p = MakeAxisPlan(data.shape, axis);
  const I* idx = indices.as<const I>();
  const int64_t count = indices.numel();
  for (int64_t j = 0; j < count; ++j) {
    const int64_t v = static_cast<int64_t>(idx[j]);
    if (v < -p.axis_dim || v >= p.axis_dim) return OutOfRange(v, j, axis, p.axis_dim, data);
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

// The mean of each bag's table rows, summed and scaled as Gather + ReduceMean do (the
// first row, each next one added in bag order, then times 1/bag: reduce.cc's
// SumMiddleAxis), so the fused node gives the unfused pair's bits. The bags' ids are
// checked first, each named by its position in the [batch, bag] ids the unfused Gather
// read, as it named them.
template <typename I>
absl::Status BagMean(const TensorView& data, const TensorView& indices, const TensorView& out,
                     int64_t select) {
  const int64_t rows = data.shape[0], dim = data.shape[1];
  const int64_t batch = indices.shape[0], bag = indices.shape.back();
  const int64_t features = select >= 0 ? indices.shape[1] : 1;
  const I* first = indices.as<const I>() + (select >= 0 ? select * bag : 0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < bag; ++k) {
      const int64_t v = static_cast<int64_t>(first[b * features * bag + k]);
      if (v < -rows || v >= rows) return OutOfRange(v, b * bag + k, 0, rows, data);
    }
  }
  const I* ids = first;
  const float* table = data.as<const float>();
  float* y = out.as<float>();
  const float scale = bag == 0 ? 0.0f : 1.0f / static_cast<float>(bag);  // as ReduceMean
  for (int64_t b = 0; b < batch; ++b, ids += features * bag, y += dim) {
    if (bag == 0) std::fill(y, y + dim, 0.0f);
    for (int64_t k = 0; k < bag; ++k) {
      int64_t v = static_cast<int64_t>(ids[k]);
      if (v < 0) v += rows;
      const float* row = table + v * dim;
      if (k == 0) {
        std::copy(row, row + dim, y);
      } else {
        for (int64_t i = 0; i < dim; ++i) y[i] += row[i];
      }
    }
    // An empty bag gives 0, as the unfused ReduceMean does.
    for (int64_t i = 0; i < dim; ++i) y[i] *= scale;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Gather(const KernelContext&, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const GatherAttrs& a = std::get<GatherAttrs>(attrs);
  if (a.bag_mean) {
    if (in[1].dtype == DType::kInt32) return BagMean<int32_t>(in[0], in[1], out[0], a.bag_select);
    return BagMean<int64_t>(in[0], in[1], out[0], a.bag_select);
  }
  const int64_t axis = *NormalizeAxis(a.axis, in[0].shape.size(), "Gather");
  if (in[1].dtype == DType::kInt32) return GatherRows<int32_t>(in[0], in[1], out[0], axis);
  return GatherRows<int64_t>(in[0], in[1], out[0], axis);
}

}  // namespace ndserve::kernels::cpu
