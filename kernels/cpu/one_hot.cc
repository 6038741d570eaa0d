// OneHot on the CPU: the output filled with off_value, then on_value where each index
// names its class. An index outside [-depth, depth) leaves its row all off, as ONNX
// defines.
#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/numeric_dispatch.h"

namespace ndserve::kernels::cpu {
namespace {

template <typename T, typename I>
void Fill(const OneHotAttrs& a, const I* idx, int64_t outer, int64_t inner, T* y) {
  const T off = static_cast<T>(a.off), on = static_cast<T>(a.on);
  std::fill(y, y + outer * a.depth * inner, off);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t v = static_cast<int64_t>(idx[o * inner + i]);
      if (v < -a.depth || v >= a.depth) continue;
      if (v < 0) v += a.depth;
      y[(o * a.depth + v) * inner + i] = on;
    }
  }
}

}  // namespace

absl::Status OneHot(const KernelContext&, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const OneHotAttrs& a = std::get<OneHotAttrs>(attrs);
  const ShapeSpan idx = in[0].shape;
  const int64_t axis = *NormalizeAxis(a.axis, idx.size() + 1, "OneHot");
  const int64_t outer = NumElements(idx.subspan(0, axis));
  const int64_t inner = NumElements(idx.subspan(axis));
  return ForNumeric(out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (in[0].dtype == DType::kInt32) {
      Fill<T>(a, in[0].as<const int32_t>(), outer, inner, out[0].as<T>());
    } else {
      Fill<T>(a, in[0].as<const int64_t>(), outer, inner, out[0].as<T>());
    }
  });
}

}  // namespace ndserve::kernels::cpu
