// CUDA Shape and Size: the values come from the input's shape on the host and are written
// by a one-block kernel that takes them as launch parameters, so no device memory is read
// and nothing waits for the stream.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/shape_of_launchers.h"

namespace ndserve::kernels::gpu {

absl::Status ShapeOf(const KernelContext& ctx, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const ShapeAttrs& a = std::get<ShapeAttrs>(attrs);
  const int64_t rank = static_cast<int64_t>(in[0].shape.size());
  const int64_t first = a.First(rank);
  const int64_t last = a.Last(rank);
  if (last - first > kMaxShapeValues) {
    return absl::UnimplementedError(absl::StrCat("Shape: more than ", kMaxShapeValues,
                                                 " dims on CUDA (input rank ", rank, ")"));
  }
  Int64Values values;
  values.n = static_cast<int>(last - first);
  for (int i = 0; i < values.n; ++i) values.v[i] = in[0].shape[first + i];
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return CudaStatus(LaunchWriteInt64s(values, out[0].as<int64_t>(), StreamOf(ctx)), "Shape launch");
}

absl::Status SizeOf(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs&) {
  Int64Values values;
  values.n = 1;
  values.v[0] = NumElements(in[0].shape);
  NDS_RETURN_IF_ERROR(ActivateDevice(ctx));
  return CudaStatus(LaunchWriteInt64s(values, out[0].as<int64_t>(), StreamOf(ctx)), "Size launch");
}

}  // namespace ndserve::kernels::gpu
