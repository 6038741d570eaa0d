// Data movement on the CPU: Slice, Expand, Tile (one strided walk, data_plans.h), Split,
// Pad, Trilu, and the generators ConstantOfShape and Range. All but Range move whole
// elements by their size, so every fixed-size dtype is covered.
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided_gather.h"
#include "kernels/data_plans.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

absl::Status RunStrided(const TensorView& in, const TensorView& out, const StridedPlan& p) {
  ForElementSize(in.dtype, [&](auto e) {
    using E = decltype(e);
    StridedGather(in.as<const E>(), out.as<E>(), p);
  });
  return absl::OkStatus();
}

template <typename E>
void Fill(E* y, int64_t n, uint64_t bits) {
  E v;
  std::memcpy(&v, &bits, sizeof(E));
  for (int64_t i = 0; i < n; ++i) y[i] = v;
}

template <typename E>
void PadLoop(const E* x, E* y, ShapeSpan in, ShapeSpan out, absl::Span<const int64_t> pads,
             PadMode mode, uint64_t fill_bits) {
  const int64_t numel = NumElements(out);
  if (numel == 0) return;
  E fill;
  std::memcpy(&fill, &fill_bits, sizeof(E));
  const std::size_t rank = out.size();
  if (rank == 0) {
    y[0] = x[0];
    return;
  }
  const Shape in_strides = ContiguousStrides(in);
  const int64_t n_out = out[rank - 1], n_in = in[rank - 1], begin = pads[rank - 1];
  // The output columns that read input columns [lo, hi) in order; the rest are padding.
  const int64_t lo = std::max<int64_t>(begin, 0);
  const int64_t hi = std::min<int64_t>(n_out, begin + n_in);
  Shape idx(rank, 0);
  for (int64_t row = 0; row < numel / n_out; ++row) {
    E* yr = y + row * n_out;
    int64_t base = 0;
    bool inside = true;
    for (std::size_t d = 0; d + 1 < rank; ++d) {
      const int64_t src = PadSourceIndex(idx[d], pads[d], in[d], mode);
      if (src < 0) {
        inside = false;
        break;
      }
      base += src * in_strides[d];
    }
    if (!inside) {
      for (int64_t j = 0; j < n_out; ++j) yr[j] = fill;
    } else {
      const E* xr = x + base;
      for (int64_t j = 0; j < lo && j < n_out; ++j) {
        const int64_t src = PadSourceIndex(j, begin, n_in, mode);
        yr[j] = src < 0 ? fill : xr[src];
      }
      if (hi > lo) std::memcpy(yr + lo, xr + (lo - begin), (hi - lo) * sizeof(E));
      for (int64_t j = std::max(hi, lo); j < n_out; ++j) {
        const int64_t src = PadSourceIndex(j, begin, n_in, mode);
        yr[j] = src < 0 ? fill : xr[src];
      }
    }
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      if (++idx[d] < out[d]) break;
      idx[d] = 0;
    }
  }
}

template <typename E>
void TriluLoop(const E* x, E* y, int64_t matrices, int64_t rows, int64_t cols, bool upper,
               int64_t k) {
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t off = (m * rows + i) * cols;
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = upper ? j - i >= k : j - i <= k;
        y[off + j] = keep ? x[off + j] : E(0);
      }
    }
  }
}

template <typename T>
void RangeLoop(T* y, int64_t n, const RangeAttrs& a) {
  if (a.start.is_real) {
    // In double, as start + i * delta, so the values do not drift with the count.
    for (int64_t i = 0; i < n; ++i) {
      y[i] = static_cast<T>(a.start.real + static_cast<double>(i) * a.delta.real);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(a.start.integer + i * a.delta.integer);
  }
}

}  // namespace

absl::Status Slice(const KernelContext&, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const SliceResolved r = *ResolveSlice(in[0].shape, std::get<SliceAttrs>(attrs));
  return RunStrided(in[0], out[0], r.plan);
}

absl::Status Expand(const KernelContext&, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs&) {
  return RunStrided(in[0], out[0], MakeExpandPlan(in[0].shape, out[0].shape));
}

absl::Status Tile(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return RunStrided(in[0], out[0], MakeTilePlan(in[0].shape, std::get<TileAttrs>(attrs).repeats));
}

absl::Status Split(const KernelContext&, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const int64_t axis =
      *NormalizeAxis(std::get<SplitAttrs>(attrs).axis, in[0].shape.size(), "Split");
  const AxisPlan pi = MakeAxisPlan(in[0].shape, axis);
  const std::size_t elem = DTypeSize(in[0].dtype);
  const std::size_t in_row = static_cast<std::size_t>(pi.axis_dim * pi.inner) * elem;
  const auto* src = static_cast<const unsigned char*>(in[0].data);
  std::size_t col = 0;  // byte offset of this output's part within an input row
  for (const TensorView& t : out) {
    const AxisPlan po = MakeAxisPlan(t.shape, axis);
    const std::size_t row = static_cast<std::size_t>(po.axis_dim * po.inner) * elem;
    auto* dst = static_cast<unsigned char*>(t.data);
    if (row > 0) {
      for (int64_t o = 0; o < pi.outer; ++o)
        std::memcpy(dst + o * row, src + o * in_row + col, row);
    }
    col += row;
  }
  return absl::OkStatus();
}

absl::Status Pad(const KernelContext&, absl::Span<const TensorView> in,
                 absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const PadAttrs& a = std::get<PadAttrs>(attrs);
  const uint64_t fill = ScalarBits(in[0].dtype, a.value);
  ForElementSize(in[0].dtype, [&](auto e) {
    using E = decltype(e);
    PadLoop(in[0].as<const E>(), out[0].as<E>(), in[0].shape, out[0].shape, a.pads, a.mode, fill);
  });
  return absl::OkStatus();
}

absl::Status Trilu(const KernelContext&, absl::Span<const TensorView> in,
                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const TriluAttrs& a = std::get<TriluAttrs>(attrs);
  const ShapeSpan s = in[0].shape;
  const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  if (rows * cols == 0) return absl::OkStatus();
  const int64_t matrices = in[0].numel() / (rows * cols);
  // Zero bits are zero in every fixed-size dtype, so the element size is all that matters.
  ForElementSize(in[0].dtype, [&](auto e) {
    using E = decltype(e);
    TriluLoop(in[0].as<const E>(), out[0].as<E>(), matrices, rows, cols, a.upper, a.k);
  });
  return absl::OkStatus();
}

absl::Status ConstantOfShape(const KernelContext&, absl::Span<const TensorView>,
                             absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const uint64_t bits = ScalarBits(out[0].dtype, std::get<ConstantOfShapeAttrs>(attrs).value);
  ForElementSize(out[0].dtype, [&](auto e) {
    using E = decltype(e);
    Fill(out[0].as<E>(), out[0].numel(), bits);
  });
  return absl::OkStatus();
}

absl::Status Range(const KernelContext&, absl::Span<const TensorView>,
                   absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const RangeAttrs& a = std::get<RangeAttrs>(attrs);
  const int64_t n = out[0].numel();
  switch (out[0].dtype) {
    case DType::kFp32:
      RangeLoop(out[0].as<float>(), n, a);
      break;
    case DType::kFp64:
      RangeLoop(out[0].as<double>(), n, a);
      break;
    case DType::kInt16:
      RangeLoop(out[0].as<int16_t>(), n, a);
      break;
    case DType::kInt32:
      RangeLoop(out[0].as<int32_t>(), n, a);
      break;
    default:
      RangeLoop(out[0].as<int64_t>(), n, a);
      break;
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
