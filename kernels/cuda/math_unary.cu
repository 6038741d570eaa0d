// The math family's unary elementwise ops: one grid-stride loop per op over the shared
// functors of kernels/math_ops.h, so CPU and CUDA agree on edge cases.
#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/math_launchers.h"
#include "kernels/math_ops.h"

namespace ndserve::kernels::gpu {
namespace {

template <typename T, typename Op>
__global__ void MapKernel(const T* x, T* y, int64_t n, Op op) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) y[i] = op(x[i]);
}

template <typename In, typename Out, typename Op>
__global__ void MapToKernel(const In* x, Out* y, int64_t n, Op op) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) y[i] = op(x[i]);
}

template <typename Op>
cudaError_t MapFloatToBool(const void* x, void* y, int64_t n, Op op, cudaStream_t stream) {
  MapToKernel<float, uint8_t, Op><<<GridFor(n), kBlock, 0, stream>>>(
      static_cast<const float*>(x), static_cast<uint8_t*>(y), n, op);
  return cudaGetLastError();
}

template <typename T, typename Op>
cudaError_t Map(const void* x, void* y, int64_t n, Op op, cudaStream_t stream) {
  MapKernel<T, Op>
      <<<GridFor(n), kBlock, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n, op);
  return cudaGetLastError();
}

template <typename Op>
cudaError_t MapSigned(ScalarType type, const void* x, void* y, int64_t n, cudaStream_t stream) {
  switch (type) {
    case ScalarType::kFp32:
      return Map<float>(x, y, n, Op(), stream);
    case ScalarType::kInt32:
      return Map<int32_t>(x, y, n, Op(), stream);
    case ScalarType::kInt64:
      return Map<int64_t>(x, y, n, Op(), stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t LaunchMathUnary(MathUnaryCode op, ScalarType type, const void* x, void* y, int64_t n,
                            float alpha, float beta, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case MathUnaryCode::kSqrt:
      return Map<float>(x, y, n, SqrtOp(), stream);
    case MathUnaryCode::kExp:
      return Map<float>(x, y, n, ExpOp(), stream);
    case MathUnaryCode::kLog:
      return Map<float>(x, y, n, LogOp(), stream);
    case MathUnaryCode::kReciprocal:
      return Map<float>(x, y, n, ReciprocalOp(), stream);
    case MathUnaryCode::kFloor:
      return Map<float>(x, y, n, FloorOp(), stream);
    case MathUnaryCode::kCeil:
      return Map<float>(x, y, n, CeilOp(), stream);
    case MathUnaryCode::kSin:
      return Map<float>(x, y, n, SinOp(), stream);
    case MathUnaryCode::kTan:
      return Map<float>(x, y, n, TanOp(), stream);
    case MathUnaryCode::kAsin:
      return Map<float>(x, y, n, AsinOp(), stream);
    case MathUnaryCode::kAcos:
      return Map<float>(x, y, n, AcosOp(), stream);
    case MathUnaryCode::kAtan:
      return Map<float>(x, y, n, AtanOp(), stream);
    case MathUnaryCode::kSelu:
      return Map<float>(x, y, n, SeluOp{alpha, beta}, stream);
    case MathUnaryCode::kCelu:
      return Map<float>(x, y, n, CeluOp{alpha}, stream);
    case MathUnaryCode::kIsNaN:
      return MapFloatToBool(x, y, n, IsNaNOp(), stream);
    case MathUnaryCode::kIsInf:
      return MapFloatToBool(x, y, n, IsInfOp{alpha != 0.0f, beta != 0.0f}, stream);
    case MathUnaryCode::kCos:
      return Map<float>(x, y, n, CosOp(), stream);
    case MathUnaryCode::kRound:
      return Map<float>(x, y, n, RoundOp(), stream);
    case MathUnaryCode::kSoftplus:
      return Map<float>(x, y, n, SoftplusOp(), stream);
    case MathUnaryCode::kSign:
      return MapSigned<SignOp>(type, x, y, n, stream);
    case MathUnaryCode::kNeg:
      return MapSigned<NegOp>(type, x, y, n, stream);
    case MathUnaryCode::kAbs:
      return MapSigned<AbsOp>(type, x, y, n, stream);
    case MathUnaryCode::kLeakyRelu:
      return Map<float>(x, y, n, LeakyReluOp{alpha}, stream);
    case MathUnaryCode::kElu:
      return Map<float>(x, y, n, EluOp{alpha}, stream);
    case MathUnaryCode::kHardSigmoid:
      return Map<float>(x, y, n, HardSigmoidOp{alpha, beta}, stream);
    case MathUnaryCode::kHardSwish:
      return Map<float>(x, y, n, HardSwishOp(), stream);
    case MathUnaryCode::kClip:
      return Map<float>(x, y, n, ClipOp{alpha, beta}, stream);
    case MathUnaryCode::kNot:
      return Map<uint8_t>(x, y, n, NotOp(), stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ndserve::kernels::gpu
