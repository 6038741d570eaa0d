// Cast between every fixed-size dtype; conversions from cast_convert.h, shared with the
// CPU so both devices agree bit for bit. One kernel per source type; the target type is a
// uniform switch inside, which keeps the instantiation count (and nvcc time) small.
#include "kernels/cast_convert.h"
#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

template <typename From, typename To>
__device__ __forceinline__ void Store(const From* x, void* y, int64_t i) {
  static_cast<To*>(y)[i] = Convert<From, To>(LoadElement(x, i));
}

template <typename From>
__global__ void CastKernel(const From* x, void* y, ScalarType to, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    switch (to) {
      case ScalarType::kBool:
        Store<From, bool>(x, y, i);
        break;
      case ScalarType::kUint8:
        Store<From, uint8_t>(x, y, i);
        break;
      case ScalarType::kUint16:
        Store<From, uint16_t>(x, y, i);
        break;
      case ScalarType::kUint32:
        Store<From, uint32_t>(x, y, i);
        break;
      case ScalarType::kUint64:
        Store<From, uint64_t>(x, y, i);
        break;
      case ScalarType::kInt8:
        Store<From, int8_t>(x, y, i);
        break;
      case ScalarType::kInt16:
        Store<From, int16_t>(x, y, i);
        break;
      case ScalarType::kInt32:
        Store<From, int32_t>(x, y, i);
        break;
      case ScalarType::kInt64:
        Store<From, int64_t>(x, y, i);
        break;
      case ScalarType::kFp16:
        Store<From, Half>(x, y, i);
        break;
      case ScalarType::kBf16:
        Store<From, BFloat16>(x, y, i);
        break;
      case ScalarType::kFp32:
        Store<From, float>(x, y, i);
        break;
      case ScalarType::kFp64:
        Store<From, double>(x, y, i);
        break;
    }
  }
}

template <typename From>
cudaError_t Launch(const void* x, void* y, ScalarType to, int64_t n, cudaStream_t stream) {
  CastKernel<From><<<GridFor(n), kBlock, 0, stream>>>(static_cast<const From*>(x), y, to, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchCast(ScalarType from, ScalarType to, const void* x, void* y, int64_t n,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (from) {
    case ScalarType::kBool:
      return Launch<bool>(x, y, to, n, stream);
    case ScalarType::kUint8:
      return Launch<uint8_t>(x, y, to, n, stream);
    case ScalarType::kUint16:
      return Launch<uint16_t>(x, y, to, n, stream);
    case ScalarType::kUint32:
      return Launch<uint32_t>(x, y, to, n, stream);
    case ScalarType::kUint64:
      return Launch<uint64_t>(x, y, to, n, stream);
    case ScalarType::kInt8:
      return Launch<int8_t>(x, y, to, n, stream);
    case ScalarType::kInt16:
      return Launch<int16_t>(x, y, to, n, stream);
    case ScalarType::kInt32:
      return Launch<int32_t>(x, y, to, n, stream);
    case ScalarType::kInt64:
      return Launch<int64_t>(x, y, to, n, stream);
    case ScalarType::kFp16:
      return Launch<Half>(x, y, to, n, stream);
    case ScalarType::kBf16:
      return Launch<BFloat16>(x, y, to, n, stream);
    case ScalarType::kFp32:
      return Launch<float>(x, y, to, n, stream);
    case ScalarType::kFp64:
      return Launch<double>(x, y, to, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ndserve::kernels::gpu
