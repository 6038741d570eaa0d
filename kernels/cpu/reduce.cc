// ReduceSum and ReduceMean over any set of axes, FP32 accumulation. The input is walked
// once in memory order; each innermost run either sums into one output (reduced innermost
// dim) or adds elementwise into a contiguous output run (kept innermost dim).
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/row_walker.h"
#include "kernels/plans.h"
#include "kernels/shape_inference.h"

namespace ndserve::kernels::cpu {
namespace {

absl::Status Reduce(OpKind op, absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                    const OpAttrs& attrs) {
  const std::vector<int64_t> axes =
      *ResolveReduceAxes(std::get<ReduceAttrs>(attrs), in[0].shape.size(), OpKindName(op));
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  if (axes.empty()) {  // noop_with_empty_axes
    if (y != x) std::memcpy(y, x, in[0].nbytes());
    return absl::OkStatus();
  }
  const ReducePlan p = MakeReducePlan(in[0].shape, axes);
  std::fill(y, y + p.out_numel, 0.0f);
  const int64_t in_numel = in[0].numel();
  if (in_numel > 0 && p.dims.empty()) {
    y[0] = x[0];
  } else if (in_numel > 0) {
    const int64_t n = p.dims.back();
    const bool inner_reduced = p.reduced.back();
    RowWalker<2> walk(p.dims, {ShapeSpan(p.in_strides), ShapeSpan(p.out_strides)});
    for (int64_t row = 0; row < in_numel / n; ++row, walk.Next()) {
      const float* xr = x + walk.offset(0);
      float* yr = y + walk.offset(1);
      if (inner_reduced) {
        float s = 0.0f;
        for (int64_t i = 0; i < n; ++i) s += xr[i];
        yr[0] += s;
      } else {
        for (int64_t i = 0; i < n; ++i) yr[i] += xr[i];
      }
    }
  }
  if (op == OpKind::kReduceMean) {
    // An empty reduction gives 0 * inf = NaN, as numpy's mean of nothing does.
    const float scale = 1.0f / static_cast<float>(p.reduce_numel);
    for (int64_t i = 0; i < p.out_numel; ++i) y[i] *= scale;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReduceSum(const KernelContext&, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Reduce(OpKind::kReduceSum, in, out, attrs);
}

absl::Status ReduceMean(const KernelContext&, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Reduce(OpKind::kReduceMean, in, out, attrs);
}

}  // namespace ndserve::kernels::cpu
