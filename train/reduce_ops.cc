#include "train/reduce_ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/train_kernels.h"
#include "train/cpu_math.h"

namespace ndserve::train {
namespace {

absl::StatusOr<Variable> Reduce(NDManager& scope, const Variable& x,
                                absl::Span<const std::int64_t> axes, bool keepdims, bool mean) {
  const char* op = mean ? "ReduceMean" : "ReduceSum";
  const std::size_t rank = x.shape().size();
  Dims kept(x.shape().begin(), x.shape().end());  // the keepdims shape
  if (axes.empty()) {
    std::fill(kept.begin(), kept.end(), 1);
  } else {
    for (std::int64_t a : axes) {
      NDS_ASSIGN_OR_RETURN(std::int64_t axis, NormAxis(a, rank, op));
      kept[axis] = 1;
    }
  }
  // Without keepdims the reduced dims (those `kept` set to 1 where x had a dim) go.
  Dims out_shape;
  std::vector<bool> reduced(rank, axes.empty());
  for (std::int64_t a : axes) reduced[a < 0 ? a + static_cast<std::int64_t>(rank) : a] = true;
  for (std::size_t d = 0; d < rank; ++d) {
    if (keepdims) {
      out_shape.push_back(kept[d]);
    } else if (!reduced[d]) {
      out_shape.push_back(x.shape()[d]);
    }
  }
  const std::int64_t n_in = x.value().num_elements();
  const std::int64_t n_out = NumElements(kept);
  const float scale = mean ? (n_out > 0 && n_in > 0 ? static_cast<float>(n_out) / static_cast<float>(n_in) : 0.0f) : 1.0f;
  NDS_ASSIGN_OR_RETURN(NDArray out, NewF32(scope, out_shape));
  NDS_ASSIGN_OR_RETURN(float* po, F32(out));
  NDS_ASSIGN_OR_RETURN(const float* px, F32(x.value()));
  // When the reduced dims are one contiguous block, x is [outer, reduced, inner] and
  // both directions are plain loops (no per-element offset table).
  std::int64_t outer = 1, middle = 1, inner = 1;
  int first = -1, last = -1;
  for (std::size_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      if (first < 0) first = static_cast<int>(d);
      last = static_cast<int>(d);
    }
  }
  bool block = first >= 0;
  for (int d = first; block && d <= last; ++d) block = reduced[static_cast<std::size_t>(d)];
  if (block) {
    for (int d = 0; d < static_cast<int>(rank); ++d) {
      const std::int64_t dim = x.shape()[static_cast<std::size_t>(d)];
      (d < first ? outer : d > last ? inner : middle) *= dim;
    }
    std::fill(po, po + n_out, 0.0f);
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t m = 0; m < middle; ++m) {
        const float* src = px + (o * middle + m) * inner;
        float* dst = po + o * inner;
        for (std::int64_t i = 0; i < inner; ++i) dst[i] += src[i];
      }
    }
  } else {
    ReduceToShape(px, x.shape(), kept, po, false);
  }
  if (mean) {
    for (std::int64_t e = 0; e < n_out; ++e) po[e] *= scale;
  }
  Dims in_shape(x.shape().begin(), x.shape().end());
  auto creator = Record(op, {x}, [kept, in_shape, scale, block, outer, middle, inner](
                                     BackwardContext& ctx, const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    NDS_ASSIGN_OR_RETURN(float* dst, F32(s.array));
    NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
    const std::int64_t n = NumElements(in_shape);
    if (block) {
      if (!s.accumulate) std::fill(dst, dst + n, 0.0f);
      for (std::int64_t o = 0; o < outer; ++o) {
        for (std::int64_t m = 0; m < middle; ++m) {
          float* d = dst + (o * middle + m) * inner;
          const float* src = pg + o * inner;
          for (std::int64_t i = 0; i < inner; ++i) d[i] += scale * src[i];
        }
      }
      return absl::OkStatus();
    }
    const std::vector<std::int64_t> offsets = BroadcastOffsets(kept, in_shape);
    if (!s.accumulate) std::fill(dst, dst + n, 0.0f);
    for (std::int64_t e = 0; e < n; ++e) dst[e] += scale * pg[offsets[e]];
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

absl::StatusOr<Variable> SoftmaxImpl(NDManager& scope, const Variable& x, std::int64_t axis,
                                     bool log) {
  const char* op = log ? "LogSoftmax" : "Softmax";
  NDS_ASSIGN_OR_RETURN(axis, NormAxis(axis, x.shape().size(), op));
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (std::size_t d = axis + 1; d < x.shape().size(); ++d) inner *= x.shape()[d];
  const std::int64_t dim = x.shape()[axis];
  NDS_ASSIGN_OR_RETURN(NDArray out, NewF32(scope, x.shape()));
  NDS_ASSIGN_OR_RETURN(float* po, F32(out));
  NDS_ASSIGN_OR_RETURN(const float* px, F32(x.value()));
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      const float* xi = px + o * dim * inner + i;
      float* yi = po + o * dim * inner + i;
      float mx = -INFINITY;
      for (std::int64_t d = 0; d < dim; ++d) mx = std::max(mx, xi[d * inner]);
      float sum = 0.0f;
      for (std::int64_t d = 0; d < dim; ++d) sum += std::exp(xi[d * inner] - mx);
      const float lse = mx + std::log(sum);
      for (std::int64_t d = 0; d < dim; ++d) {
        yi[d * inner] = log ? xi[d * inner] - lse : std::exp(xi[d * inner] - lse);
      }
    }
  }
  auto creator = Record(op, {x}, [out, outer, inner, dim, log](BackwardContext& ctx,
                                                                const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(0));
    NDS_ASSIGN_OR_RETURN(float* dst, F32(s.array));
    NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
    NDS_ASSIGN_OR_RETURN(const float* py, F32(out));
    for (std::int64_t o = 0; o < outer; ++o) {
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t base = o * dim * inner + i;
        float dot = 0.0f;
        for (std::int64_t d = 0; d < dim; ++d) {
          const std::int64_t e = base + d * inner;
          dot += log ? pg[e] : pg[e] * py[e];
        }
        for (std::int64_t d = 0; d < dim; ++d) {
          const std::int64_t e = base + d * inner;
          // softmax: y (g - <g, y>); log-softmax: g - exp(y) sum(g).
          const float v = log ? pg[e] - std::exp(py[e]) * dot : py[e] * (pg[e] - dot);
          dst[e] = s.accumulate ? dst[e] + v : v;
        }
      }
    }
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace

absl::StatusOr<Variable> ReduceSum(NDManager& scope, const Variable& x,
                                   absl::Span<const std::int64_t> axes, bool keepdims) {
  return Reduce(scope, x, axes, keepdims, false);
}
absl::StatusOr<Variable> ReduceMean(NDManager& scope, const Variable& x,
                                    absl::Span<const std::int64_t> axes, bool keepdims) {
  return Reduce(scope, x, axes, keepdims, true);
}
absl::StatusOr<Variable> Softmax(NDManager& scope, const Variable& x, std::int64_t axis) {
  return SoftmaxImpl(scope, x, axis, false);
}
absl::StatusOr<Variable> LogSoftmax(NDManager& scope, const Variable& x, std::int64_t axis) {
  return SoftmaxImpl(scope, x, axis, true);
}

absl::StatusOr<Variable> LayerNorm(NDManager& scope, const Variable& x, const Variable& scale,
                                   const Variable& bias, std::int64_t axis, float epsilon) {
  NDS_ASSIGN_OR_RETURN(axis, NormAxis(axis, x.shape().size(), "LayerNormalization"));
  std::int64_t rows = 1, cols = 1;
  for (std::int64_t d = 0; d < axis; ++d) rows *= x.shape()[d];
  for (std::size_t d = axis; d < x.shape().size(); ++d) cols *= x.shape()[d];
  const bool has_bias = !bias.is_null();
  if (scale.value().num_elements() != cols || (has_bias && bias.value().num_elements() != cols)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LayerNormalization: scale and bias must hold ", cols, " elements"));
  }
  NDS_ASSIGN_OR_RETURN(NDArray out, NewF32(scope, x.shape()));
  // xhat and 1/sigma per row, for the backward.
  NDS_ASSIGN_OR_RETURN(NDArray xhat, NewF32(scope, x.shape()));
  NDS_ASSIGN_OR_RETURN(NDArray rstd, NewF32(scope, Dims{rows}));
  NDS_ASSIGN_OR_RETURN(float* po, F32(out));
  NDS_ASSIGN_OR_RETURN(float* ph, F32(xhat));
  NDS_ASSIGN_OR_RETURN(float* pr, F32(rstd));
  NDS_ASSIGN_OR_RETURN(const float* px, F32(x.value()));
  NDS_ASSIGN_OR_RETURN(const float* pw, F32(scale.value()));
  const float* pb = nullptr;
  if (has_bias) {
    NDS_ASSIGN_OR_RETURN(pb, F32(bias.value()));
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * cols;
    float mean = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) mean += xr[c];
    mean /= static_cast<float>(cols);
    float var = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= static_cast<float>(cols);
    pr[r] = 1.0f / std::sqrt(var + epsilon);
    for (std::int64_t c = 0; c < cols; ++c) {
      ph[r * cols + c] = (xr[c] - mean) * pr[r];
      po[r * cols + c] = ph[r * cols + c] * pw[c] + (pb != nullptr ? pb[c] : 0.0f);
    }
  }
  std::vector<Variable> inputs{x, scale};
  if (has_bias) inputs.push_back(bias);
  auto creator = Record("LayerNormalization", std::move(inputs),
                        [xhat, rstd, rows, cols](BackwardContext& ctx, const NDArray& g) -> absl::Status {
    NDS_ASSIGN_OR_RETURN(const float* pg, F32(g));
    NDS_ASSIGN_OR_RETURN(const float* ph, F32(xhat));
    NDS_ASSIGN_OR_RETURN(const float* pr, F32(rstd));
    NDS_ASSIGN_OR_RETURN(const float* pw, F32(ctx.node().inputs[1].value()));
    if (g.device().is_cuda()) {
      return absl::UnimplementedError(
          "LayerNormalization backward on CUDA arrays is not wired yet");
    }
    // The math is the training table's (kernels/train_kernels.h, docs/design.md §10.2);
    // each wanted gradient is one call, so each gets its own slot's accumulate flag.
    NDS_ASSIGN_OR_RETURN(const kernels::TrainKernels* math,
                         kernels::LookupTrainKernels(DeviceKind::kCpu));
    const kernels::KernelContext cpu = kernels::KernelContext::Cpu();
    for (int i = 0; i < static_cast<int>(ctx.node().inputs.size()); ++i) {
      if (!ctx.NeedsGrad(i)) continue;
      NDS_ASSIGN_OR_RETURN(GradSlot s, ctx.Slot(i));
      NDS_ASSIGN_OR_RETURN(float* d, F32(s.array));
      NDS_RETURN_IF_ERROR(math->layer_norm_backward(cpu, ph, pw, pr, pg, rows, cols,
                                                    i == 0 ? d : nullptr, i == 1 ? d : nullptr,
                                                    i == 2 ? d : nullptr, s.accumulate));
    }
    return absl::OkStatus();
  });
  return Variable::FromOp(std::move(out), std::move(creator));
}

}  // namespace ndserve::train
