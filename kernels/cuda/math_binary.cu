// The math family's broadcasting ops: PRelu, Pow, Min/Max (one launch per input pair),
// the comparisons (BOOL out), And/Or, and Where over three operands. Offsets come from
// the shared IndexMap walk (device_util.cuh); the scalar functors from kernels/math_ops.h.
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/math_launchers.h"
#include "kernels/math_ops.h"

namespace ndserve::kernels::gpu {
namespace {

template <typename A, typename B, typename O, typename Op>
__global__ void BinaryKernel(const A* a, const B* b, O* out, IndexMap map, int64_t n, Op op) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t oa, ob;
    MapOffsets(map, i, &oa, &ob);
    out[i] = op(a[oa], b[ob]);
  }
}

template <typename A, typename B, typename O, typename Op>
cudaError_t Launch(const void* a, const void* b, void* out, const IndexMap& map, int64_t n, Op op,
                   cudaStream_t stream) {
  BinaryKernel<A, B, O, Op><<<GridFor(n), kBlock, 0, stream>>>(
      static_cast<const A*>(a), static_cast<const B*>(b), static_cast<O*>(out), map, n, op);
  return cudaGetLastError();
}

// Same-typed operands of FP32, INT32 or INT64; the output is O, or the operands' type when
// O is void.
template <typename O, typename Op>
cudaError_t LaunchNumeric(ScalarType type, const void* a, const void* b, void* out,
                          const IndexMap& map, int64_t n, cudaStream_t stream) {
  switch (type) {
    case ScalarType::kFp32:
      using F = std::conditional_t<std::is_void<O>::value, float, O>;
      return Launch<float, float, F>(a, b, out, map, n, Op(), stream);
    case ScalarType::kInt32:
      using I = std::conditional_t<std::is_void<O>::value, int32_t, O>;
      return Launch<int32_t, int32_t, I>(a, b, out, map, n, Op(), stream);
    case ScalarType::kInt64:
      using L = std::conditional_t<std::is_void<O>::value, int64_t, O>;
      return Launch<int64_t, int64_t, L>(a, b, out, map, n, Op(), stream);
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename T>
__global__ void WhereKernel(const uint8_t* cond, const T* x, const T* y, T* out, IndexMap cx,
                            IndexMap ym, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t oc, ox;
    MapOffsets(cx, i, &oc, &ox);
    out[i] = cond[oc] != 0 ? x[ox] : y[MapOffset0(ym, i)];
  }
}

template <typename T>
cudaError_t LaunchWhereTyped(const uint8_t* cond, const void* x, const void* y, void* out,
                             const IndexMap& cx, const IndexMap& ym, int64_t n,
                             cudaStream_t stream) {
  WhereKernel<T><<<GridFor(n), kBlock, 0, stream>>>(
      cond, static_cast<const T*>(x), static_cast<const T*>(y), static_cast<T*>(out), cx, ym, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchMathBinary(MathBinaryCode op, ScalarType a_type, ScalarType b_type, const void* a,
                             const void* b, void* out, const IndexMap& map, int64_t n,
                             cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case MathBinaryCode::kPRelu:
      return Launch<float, float, float>(a, b, out, map, n, PReluOp(), stream);
    case MathBinaryCode::kPow:
      switch (b_type) {
        case ScalarType::kFp32:
          return Launch<float, float, float>(a, b, out, map, n, PowOp(), stream);
        case ScalarType::kInt32:
          return Launch<float, int32_t, float>(a, b, out, map, n, PowOp(), stream);
        case ScalarType::kInt64:
          return Launch<float, int64_t, float>(a, b, out, map, n, PowOp(), stream);
        default:
          return cudaErrorInvalidValue;
      }
    case MathBinaryCode::kMod:
      switch (a_type) {
        case ScalarType::kInt32:
          return Launch<int32_t, int32_t, int32_t>(a, b, out, map, n, ModOp(), stream);
        case ScalarType::kInt64:
          return Launch<int64_t, int64_t, int64_t>(a, b, out, map, n, ModOp(), stream);
        default:
          return cudaErrorInvalidValue;
      }
    case MathBinaryCode::kFmod:
      return LaunchNumeric<void, FmodOp>(a_type, a, b, out, map, n, stream);
    case MathBinaryCode::kMin:
      return LaunchNumeric<void, MinOp>(a_type, a, b, out, map, n, stream);
    case MathBinaryCode::kMax:
      return LaunchNumeric<void, MaxOp>(a_type, a, b, out, map, n, stream);
    case MathBinaryCode::kEqual:
      if (a_type == ScalarType::kBool) {
        return Launch<uint8_t, uint8_t, uint8_t>(a, b, out, map, n, BoolEqualOp(), stream);
      }
      return LaunchNumeric<uint8_t, EqualOp>(a_type, a, b, out, map, n, stream);
    case MathBinaryCode::kLess:
      return LaunchNumeric<uint8_t, LessOp>(a_type, a, b, out, map, n, stream);
    case MathBinaryCode::kGreater:
      return LaunchNumeric<uint8_t, GreaterOp>(a_type, a, b, out, map, n, stream);
    case MathBinaryCode::kLessOrEqual:
      return LaunchNumeric<uint8_t, LessOrEqualOp>(a_type, a, b, out, map, n, stream);
    case MathBinaryCode::kGreaterOrEqual:
      return LaunchNumeric<uint8_t, GreaterOrEqualOp>(a_type, a, b, out, map, n, stream);
    case MathBinaryCode::kAnd:
      return Launch<uint8_t, uint8_t, uint8_t>(a, b, out, map, n, AndOp(), stream);
    case MathBinaryCode::kOr:
      return Launch<uint8_t, uint8_t, uint8_t>(a, b, out, map, n, OrOp(), stream);
    case MathBinaryCode::kXor:
      return Launch<uint8_t, uint8_t, uint8_t>(a, b, out, map, n, XorOp(), stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchWhere(const uint8_t* cond, const void* x, const void* y, void* out,
                        int elem_bytes, const IndexMap& cond_x, const IndexMap& y_map, int64_t n,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return LaunchWhereTyped<uint8_t>(cond, x, y, out, cond_x, y_map, n, stream);
    case 2:
      return LaunchWhereTyped<uint16_t>(cond, x, y, out, cond_x, y_map, n, stream);
    case 4:
      return LaunchWhereTyped<uint32_t>(cond, x, y, out, cond_x, y_map, n, stream);
    case 8:
      return LaunchWhereTyped<uint64_t>(cond, x, y, out, cond_x, y_map, n, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace ndserve::kernels::gpu
