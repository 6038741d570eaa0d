// GatherND on the CPU: every index tuple is checked before any byte is written, so a bad
// index is INVALID_ARGUMENT naming it and the output is untouched; then each tuple's
// slice is copied, in tuple order (kernels/gather_nd_plan.h).
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided_gather.h"  // ForElementSize
#include "kernels/gather_nd_plan.h"

namespace ndserve::kernels::cpu {
namespace {

// "indices[1,0,2]": where the flat position `at` of indices lies.
std::string IndexPosition(ShapeSpan indices, int64_t at) {
  Shape coord(indices.size(), 0);
  for (int64_t d = static_cast<int64_t>(indices.size()) - 1; d >= 0; --d) {
    coord[d] = at % indices[d];
    at /= indices[d];
  }
  return absl::StrCat("indices[", absl::StrJoin(coord, ","), "]");
}

absl::Status CheckTuples(const GatherNDPlan& p, const int64_t* idx, int64_t batch_dims,
                         ShapeSpan data, ShapeSpan indices) {
  for (int64_t j = 0; j < p.tuples * p.k; ++j) {
    const int64_t i = j % p.k, v = idx[j], dim = p.dims[i];
    if (v < -dim || v >= dim) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "GatherND: index %d at %s is out of range for dim %d of size %d (data %s, "
          "batch_dims %d)",
          v, IndexPosition(indices, j), batch_dims + i, dim, ShapeToString(data), batch_dims));
    }
  }
  return absl::OkStatus();
}

template <typename E>
void CopySlices(const GatherNDPlan& p, const int64_t* idx, const E* x, E* y) {
  for (int64_t g = 0; g < p.tuples; ++g) {
    int64_t at = (g / p.per_batch) * p.batch_stride;
    for (int64_t i = 0; i < p.k; ++i) {
      const int64_t v = idx[g * p.k + i];
      at += (v < 0 ? v + p.dims[i] : v) * p.strides[i];
    }
    if (p.slice == 1) {
      y[g] = x[at];
    } else {
      std::memcpy(y + g * p.slice, x + at, p.slice * sizeof(E));
    }
  }
}

}  // namespace

absl::Status GatherND(const KernelContext&, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const int64_t batch_dims = std::get<GatherNDAttrs>(attrs).batch_dims;
  const GatherNDPlan p = MakeGatherNDPlan(in[0].shape, in[1].shape, batch_dims);
  const int64_t* idx = in[1].as<const int64_t>();
  NDS_RETURN_IF_ERROR(CheckTuples(p, idx, batch_dims, in[0].shape, in[1].shape));
  if (p.slice == 0) return absl::OkStatus();
  ForElementSize(in[0].dtype, [&](auto tag) {
    using E = decltype(tag);
    CopySlices(p, idx, in[0].as<const E>(), out[0].as<E>());
  });
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
