// Cast between every fixed-size dtype, element conversions from cast_convert.h (shared
// with CUDA so both devices agree bit for bit).
#include <cstdint>

#include "kernels/cast_convert.h"
#include "kernels/cpu/cpu_kernels.h"

namespace ndserve::kernels::cpu {
namespace {

template <typename T>
struct Tag {
  using type = T;
};

// Calls fn(Tag<T>{}) with the C++ element type of `dtype`; false for BYTES.
template <typename Fn>
bool VisitDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kBool:
      fn(Tag<bool>{});
      return true;
    case DType::kUint8:
      fn(Tag<uint8_t>{});
      return true;
    case DType::kUint16:
      fn(Tag<uint16_t>{});
      return true;
    case DType::kUint32:
      fn(Tag<uint32_t>{});
      return true;
    case DType::kUint64:
      fn(Tag<uint64_t>{});
      return true;
    case DType::kInt8:
      fn(Tag<int8_t>{});
      return true;
    case DType::kInt16:
      fn(Tag<int16_t>{});
      return true;
    case DType::kInt32:
      fn(Tag<int32_t>{});
      return true;
    case DType::kInt64:
      fn(Tag<int64_t>{});
      return true;
    case DType::kFp16:
      fn(Tag<Half>{});
      return true;
    case DType::kBf16:
      fn(Tag<BFloat16>{});
      return true;
    case DType::kFp32:
      fn(Tag<float>{});
      return true;
    case DType::kFp64:
      fn(Tag<double>{});
      return true;
    case DType::kBytes:
      return false;
  }
  return false;
}

}  // namespace

absl::Status Cast(const KernelContext&, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs&) {
  const int64_t n = in[0].numel();
  const void* src = in[0].data;
  void* dst = out[0].data;
  bool ok = VisitDType(in[0].dtype, [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    VisitDType(out[0].dtype, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* x = static_cast<const From*>(src);
      To* y = static_cast<To*>(dst);
      for (int64_t i = 0; i < n; ++i) y[i] = Convert<From, To>(LoadElement(x, i));
    });
  });
  if (!ok) return absl::InternalError("Cast: unexpected dtype");  // InferOutputs rejects BYTES
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
