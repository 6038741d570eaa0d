// The math family's reductions and axis ops on the CPU: ReduceMax/ReduceMin (any axes),
// ArgMax, CumSum and LogSoftmax. Inner loops run along contiguous memory wherever the
// axis allows; no working memory beyond small fixed stack blocks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/numeric_dispatch.h"
#include "kernels/cpu/row_walker.h"
#include "kernels/elementwise_ops.h"
#include "kernels/math_ops.h"
#include "kernels/plans.h"
#include "kernels/shape_inference.h"
#include "kernels/topk_ops.h"

namespace ndserve::kernels::cpu {
namespace {

// The value an empty max (min) reduction gives: -inf (+inf) or the type's lowest
// (highest) value, as ONNX defines it from opset 18.
template <typename T, typename Op>
T ReduceIdentity() {
  constexpr bool kMax = std::is_same_v<Op, MaxOp>;
  if constexpr (std::numeric_limits<T>::has_infinity) {
    return kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  } else {
    return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
}

// Walks the input once in memory order: each innermost run either folds into one output
// (reduced innermost dim) or elementwise into a contiguous output run (kept one).
template <typename T, typename Op>
void ReduceWalk(const T* x, T* y, const ReducePlan& p, int64_t in_numel) {
  const Op op;
  std::fill(y, y + p.out_numel, ReduceIdentity<T, Op>());
  if (in_numel == 0) return;
  if (p.dims.empty()) {
    y[0] = x[0];
    return;
  }
  const int64_t n = p.dims.back();
  const bool inner_reduced = p.reduced.back();
  RowWalker<2> walk(p.dims, {ShapeSpan(p.in_strides), ShapeSpan(p.out_strides)});
  for (int64_t row = 0; row < in_numel / n; ++row, walk.Next()) {
    const T* xr = x + walk.offset(0);
    T* yr = y + walk.offset(1);
    if (inner_reduced) {
      T acc = yr[0];
      for (int64_t i = 0; i < n; ++i) acc = op(acc, xr[i]);
      yr[0] = acc;
    } else {
      for (int64_t i = 0; i < n; ++i) yr[i] = op(yr[i], xr[i]);
    }
  }
}

template <typename Op>
absl::Status ReduceMinMax(OpKind op, absl::Span<const TensorView> in,
                          absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const std::vector<int64_t> axes =
      *ResolveReduceAxes(std::get<ReduceAttrs>(attrs), in[0].shape.size(), OpKindName(op));
  if (axes.empty()) {  // noop_with_empty_axes
    if (out[0].data != in[0].data && in[0].nbytes() > 0) {
      std::memcpy(out[0].data, in[0].data, in[0].nbytes());
    }
    return absl::OkStatus();
  }
  const ReducePlan p = MakeReducePlan(in[0].shape, axes);
  return ForNumeric(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    ReduceWalk<T, Op>(in[0].as<const T>(), out[0].as<T>(), p, in[0].numel());
  });
}

}  // namespace

absl::Status ReduceMax(const KernelContext&, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return ReduceMinMax<MaxOp>(OpKind::kReduceMax, in, out, attrs);
}
absl::Status ReduceMin(const KernelContext&, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return ReduceMinMax<MinOp>(OpKind::kReduceMin, in, out, attrs);
}

absl::Status ArgMax(const KernelContext&, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ArgMaxAttrs& a = std::get<ArgMaxAttrs>(attrs);
  const int64_t axis = *NormalizeAxis(a.axis, in[0].shape.size(), "ArgMax");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  int64_t* y = out[0].as<int64_t>();
  return ForNumeric(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = in[0].as<const T>();
    for (int64_t o = 0; o < p.outer; ++o) {
      for (int64_t j = 0; j < p.inner; ++j) {
        y[o * p.inner + j] =
            ArgMaxRow(x + o * p.axis_dim * p.inner + j, p.axis_dim, p.inner, a.select_last_index,
                      a.largest);
      }
    }
  });
}

absl::Status ArgMin(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return ArgMax(ctx, in, out, attrs);  // the rule set largest = false
}

absl::Status TopK(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const TopKAttrs& a = std::get<TopKAttrs>(attrs);
  const int64_t axis = *NormalizeAxis(a.axis, in[0].shape.size(), "TopK");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  int64_t* idx = out[1].as<int64_t>();
  return ForNumeric(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = in[0].as<const T>();
    T* vals = out[0].as<T>();
    for (int64_t o = 0; o < p.outer; ++o) {
      for (int64_t j = 0; j < p.inner; ++j) {
        const int64_t at = o * a.k * p.inner + j;
        TopKRow<T>(RankOrder<T>{a.largest}, vals + at, idx + at, p.inner)
            .Run(x + o * p.axis_dim * p.inner + j, p.axis_dim, p.inner, a.k);
      }
    }
  });
}

absl::Status CumSum(const KernelContext&, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const CumSumAttrs& a = std::get<CumSumAttrs>(attrs);
  const int64_t axis = *NormalizeAxis(a.axis, in[0].shape.size(), "CumSum");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  const int64_t n = p.axis_dim, inner = p.inner;
  return ForNumeric(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const AddOp add;
    for (int64_t o = 0; o < p.outer; ++o) {
      const T* xb = in[0].as<const T>() + o * n * inner;
      T* yb = out[0].as<T>() + o * n * inner;
      // Row i of the axis is the previous output row plus an input row, so every inner
      // loop is contiguous.
      for (int64_t s = 0; s < n; ++s) {
        const int64_t i = a.reverse ? n - 1 - s : s;
        const int64_t prev = a.reverse ? i + 1 : i - 1;
        T* yr = yb + i * inner;
        if (s == 0) {
          for (int64_t j = 0; j < inner; ++j) yr[j] = a.exclusive ? T(0) : xb[i * inner + j];
          continue;
        }
        const T* yp = yb + prev * inner;
        const T* xr = xb + (a.exclusive ? prev : i) * inner;
        for (int64_t j = 0; j < inner; ++j) yr[j] = add(yp[j], xr[j]);
      }
    }
  });
}

absl::Status LogSoftmax(const KernelContext&, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const int64_t axis =
      *NormalizeAxis(std::get<SoftmaxAttrs>(attrs).axis, in[0].shape.size(), "LogSoftmax");
  const AxisPlan p = MakeAxisPlan(in[0].shape, axis);
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  const int64_t n = p.axis_dim, inner = p.inner;
  if (n == 0) return absl::OkStatus();
  if (inner == 1) {
    for (int64_t o = 0; o < p.outer; ++o) {
      const float* xr = x + o * n;
      float* yr = y + o * n;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, xr[i]);
      float sum = 0.0f;
      for (int64_t i = 0; i < n; ++i) sum += std::exp(xr[i] - mx);
      const float lse = std::log(sum);
      for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - mx) - lse;
    }
    return absl::OkStatus();
  }
  // Non-last axis: blocks of up to kBlock columns, with the per-column max and sum on the
  // stack, so the inner loops stay contiguous and no heap memory is needed.
  constexpr int64_t kBlock = 64;
  float mx[kBlock], sum[kBlock];
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t j0 = 0; j0 < inner; j0 += kBlock) {
      const int64_t w = std::min(kBlock, inner - j0);
      const float* xb = x + o * n * inner + j0;
      float* yb = y + o * n * inner + j0;
      std::fill(mx, mx + w, -std::numeric_limits<float>::infinity());
      std::fill(sum, sum + w, 0.0f);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < w; ++j) mx[j] = std::max(mx[j], xb[i * inner + j]);
      }
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < w; ++j) sum[j] += std::exp(xb[i * inner + j] - mx[j]);
      }
      for (int64_t j = 0; j < w; ++j) sum[j] = std::log(sum[j]);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < w; ++j) yb[i * inner + j] = (xb[i * inner + j] - mx[j]) - sum[j];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
