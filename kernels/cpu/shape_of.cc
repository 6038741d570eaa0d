// Shape and Size: INT64 values from the input's shape; the input's data is never read (it
// may live on a device, see kOpReadsShapes in ops.def).
#include <cstdint>

#include "kernels/cpu/cpu_kernels.h"

namespace ndserve::kernels::cpu {

absl::Status ShapeOf(const KernelContext&, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ShapeAttrs& a = std::get<ShapeAttrs>(attrs);
  const ShapeSpan shape = in[0].shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t* y = out[0].as<int64_t>();
  for (int64_t d = a.First(rank); d < a.Last(rank); ++d) *y++ = shape[d];
  return absl::OkStatus();
}

absl::Status SizeOf(const KernelContext&, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs&) {
  *out[0].as<int64_t>() = NumElements(in[0].shape);
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
