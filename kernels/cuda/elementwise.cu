// Broadcasting binary ops, FP32 unary math and Gemm's scaled C broadcast. The scalar
// functors are elementwise_ops.h, shared with the CPU kernels.
#include "kernels/cuda/device_util.cuh"
#include "kernels/elementwise_ops.h"

namespace ndserve::kernels::gpu {
namespace {

template <typename T, typename Op>
__global__ void BinaryKernel(const T* a, const T* b, T* out, IndexMap map, int64_t n) {
  const Op op;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t oa, ob;
    MapOffsets(map, i, &oa, &ob);
    out[i] = op(a[oa], b[ob]);
  }
}

template <typename Op>
__global__ void UnaryKernel(const float* x, float* y, int64_t n) {
  const Op op;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) y[i] = op(x[i]);
}

__global__ void ScaledBroadcastKernel(const float* c, float beta, float* y, IndexMap map,
                                      int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) y[i] = beta * c[MapOffset0(map, i)];
}

template <typename Op>
cudaError_t LaunchTyped(ScalarType type, const void* a, const void* b, void* out,
                        const IndexMap& map, int64_t n, cudaStream_t stream) {
  const unsigned grid = GridFor(n);
  switch (type) {
    case ScalarType::kFp32:
      BinaryKernel<float, Op><<<grid, kBlock, 0, stream>>>(static_cast<const float*>(a),
                                                           static_cast<const float*>(b),
                                                           static_cast<float*>(out), map, n);
      break;
    case ScalarType::kInt32:
      BinaryKernel<int32_t, Op><<<grid, kBlock, 0, stream>>>(static_cast<const int32_t*>(a),
                                                             static_cast<const int32_t*>(b),
                                                             static_cast<int32_t*>(out), map, n);
      break;
    case ScalarType::kInt64:
      BinaryKernel<int64_t, Op><<<grid, kBlock, 0, stream>>>(static_cast<const int64_t*>(a),
                                                             static_cast<const int64_t*>(b),
                                                             static_cast<int64_t*>(out), map, n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchBinary(BinaryCode op, ScalarType type, const void* a, const void* b, void* out,
                         const IndexMap& map, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case BinaryCode::kAdd:
      return LaunchTyped<AddOp>(type, a, b, out, map, n, stream);
    case BinaryCode::kSub:
      return LaunchTyped<SubOp>(type, a, b, out, map, n, stream);
    case BinaryCode::kMul:
      return LaunchTyped<MulOp>(type, a, b, out, map, n, stream);
    case BinaryCode::kDiv:
      return LaunchTyped<DivOp>(type, a, b, out, map, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchUnary(UnaryCode op, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned grid = GridFor(n);
  switch (op) {
    case UnaryCode::kRelu:
      UnaryKernel<ReluOp><<<grid, kBlock, 0, stream>>>(x, y, n);
      break;
    case UnaryCode::kSigmoid:
      UnaryKernel<SigmoidOp><<<grid, kBlock, 0, stream>>>(x, y, n);
      break;
    case UnaryCode::kTanh:
      UnaryKernel<TanhOp><<<grid, kBlock, 0, stream>>>(x, y, n);
      break;
    case UnaryCode::kErf:
      UnaryKernel<ErfOp><<<grid, kBlock, 0, stream>>>(x, y, n);
      break;
  }
  return cudaGetLastError();
}

cudaError_t LaunchScaledBroadcast(const float* c, float beta, float* y, const IndexMap& map,
                                  int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ScaledBroadcastKernel<<<GridFor(n), kBlock, 0, stream>>>(c, beta, y, map, n);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
