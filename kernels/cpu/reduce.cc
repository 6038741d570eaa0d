// ReduceSum and ReduceMean over any set of axes, FP32 accumulation. The input is walked
// once in memory order; each innermost run either sums into one output (reduced innermost
// dim) or adds elementwise into a contiguous output run (kept innermost dim).
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/integer_reduce.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/row_walker.h"
#include "kernels/plans.h"
#include "kernels/shape_inference.h"

namespace ndserve::kernels::cpu {
namespace {

// y[o, i] = scale * sum over r of x[o, r, i], all contiguous: a middle axis reduced with the
// innermost kept, as an embedding lookup's mean bag ([batch, bag, dim] -> [batch, dim]).
// Through the row walker every bag row of 32 floats paid the walker's step and a loop of
// its own (recsys b256: 22 us per bag node, most of ReduceMean's 28 % of the run).
NDS_CPU_CLONES
void SumMiddleAxis(const float* __restrict x, int64_t outer, int64_t r, int64_t inner, float scale,
                   float* __restrict y) {
  for (int64_t o = 0; o < outer; ++o, x += r * inner, y += inner) {
    for (int64_t i = 0; i < inner; ++i) y[i] = x[i];
    for (int64_t k = 1; k < r; ++k) {
      const float* xk = x + k * inner;
      for (int64_t i = 0; i < inner; ++i) y[i] += xk[i];
    }
    if (scale != 1.0f) {
      for (int64_t i = 0; i < inner; ++i) y[i] *= scale;
    }
  }
}

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
  // The mean of nothing is 0, as in ONNX Runtime and PyTorch (an empty EmbeddingBag),
  // not numpy's NaN.
  const float mean_scale = p.reduce_numel == 0 ? 0.0f : 1.0f / static_cast<float>(p.reduce_numel);
  // Merged dims [reduced, kept] or [kept, reduced, kept]: the plan's dims are contiguous.
  const std::size_t nd = p.dims.size();
  if (in[0].numel() > 0 && nd >= 2 && nd <= 3 && !p.reduced[nd - 1] && p.reduced[nd - 2] &&
      (nd == 2 || !p.reduced[0])) {
    SumMiddleAxis(x, nd == 3 ? p.dims[0] : 1, p.dims[nd - 2], p.dims[nd - 1],
                  op == OpKind::kReduceMean ? mean_scale : 1.0f, y);
    return absl::OkStatus();
  }
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
    for (int64_t i = 0; i < p.out_numel; ++i) y[i] *= mean_scale;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReduceSum(const KernelContext&, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  if (in[0].dtype != DType::kFp32) return IntegerReduceSum(in, out, attrs);
  return Reduce(OpKind::kReduceSum, in, out, attrs);
}

absl::Status ReduceMean(const KernelContext&, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Reduce(OpKind::kReduceMean, in, out, attrs);
}

}  // namespace ndserve::kernels::cpu
