// Data movement: Concat, Transpose, DepthToSpace / SpaceToDepth (a transpose of a rank-6
// view), and the byte copy behind Reshape, Flatten, Squeeze, Unsqueeze and Identity. All work on element sizes, so every fixed-size dtype is covered.
#include <cstring>

#include "absl/container/inlined_vector.h"

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided_gather.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {

absl::Status CopyInput(const KernelContext&, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs&) {
  if (out[0].data != in[0].data && in[0].nbytes() > 0) {
    std::memmove(out[0].data, in[0].data, in[0].nbytes());
  }
  return absl::OkStatus();
}

absl::Status Concat(const KernelContext&, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const int64_t axis =
      *NormalizeAxis(std::get<ConcatAttrs>(attrs).axis, out[0].shape.size(), "Concat");
  const AxisPlan po = MakeAxisPlan(out[0].shape, axis);
  const std::size_t elem = DTypeSize(out[0].dtype);
  const std::size_t out_row = static_cast<std::size_t>(po.axis_dim * po.inner) * elem;
  auto* dst = static_cast<unsigned char*>(out[0].data);
  // A few elements per input and output row (torch.stack(..., -1) of index grids: MViT's
  // relative positions stack millions of rows of one INT64 each): one pass over the
  // output, row by row, with typed stores, instead of one memcpy call per input row and a
  // pass over the whole output per input.
  bool narrow = out_row <= 16 * elem;
  for (const TensorView& t : in) {
    narrow = narrow && MakeAxisPlan(t.shape, axis).axis_dim * MakeAxisPlan(t.shape, axis).inner <= 4;
  }
  if (narrow && po.outer > 0) {
    ForElementSize(out[0].dtype, [&](auto e) {
      using E = decltype(e);
      absl::InlinedVector<const E*, 8> src;
      absl::InlinedVector<int64_t, 8> n;
      for (const TensorView& t : in) {
        const AxisPlan pi = MakeAxisPlan(t.shape, axis);
        src.push_back(t.as<const E>());
        n.push_back(pi.axis_dim * pi.inner);
      }
      E* d = reinterpret_cast<E*>(dst);
      for (int64_t o = 0; o < po.outer; ++o) {
        for (std::size_t j = 0; j < src.size(); ++j) {
          for (int64_t k = 0; k < n[j]; ++k) *d++ = src[j][o * n[j] + k];
        }
      }
    });
    return absl::OkStatus();
  }
  std::size_t col = 0;  // byte offset of this input's slice within an output row
  for (const TensorView& t : in) {
    const AxisPlan pi = MakeAxisPlan(t.shape, axis);
    const std::size_t row = static_cast<std::size_t>(pi.axis_dim * pi.inner) * elem;
    const auto* src = static_cast<const unsigned char*>(t.data);
    if (row > 0) {
      for (int64_t o = 0; o < po.outer; ++o) {
        std::memcpy(dst + o * out_row + col, src + o * row, row);
      }
    }
    col += row;
  }
  return absl::OkStatus();
}

namespace {

// y = x moved as the plan says, whatever x's element type (Transpose, DepthToSpace).
absl::Status GatherTransposed(const TensorView& x, const TensorView& y, const TransposePlan& p) {
  ForElementSize(x.dtype, [&](auto e) {
    using E = decltype(e);
    StridedGather(x.as<const E>(), y.as<E>(), p);
  });
  return absl::OkStatus();
}

}  // namespace

absl::Status Transpose(const KernelContext&, absl::Span<const TensorView> in,
                       absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const auto perm = ResolvePerm(std::get<TransposeAttrs>(attrs), in[0].shape.size());
  return GatherTransposed(in[0], out[0], MakeTransposePlan(in[0].shape, perm));
}

absl::Status DepthSpace(const KernelContext&, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const DepthSpaceView v = MakeDepthSpaceView(std::get<DepthSpaceAttrs>(attrs), in[0].shape);
  return GatherTransposed(in[0], out[0], MakeTransposePlan(v.dims, v.perm));
}

}  // namespace ndserve::kernels::cpu
