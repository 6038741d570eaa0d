#ifndef NDSERVE_KERNELS_CUDA_MATH_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_MATH_LAUNCHERS_H_

// Raw launchers of the math family's .cu kernels (math_*.cu), with the conventions of
// launchers.h: plain pointers and sizes in, the launch's cudaError_t out, work queued on
// `stream`, nothing launched for n == 0, no Abseil. The Status-returning entry points in
// math_kernels.cc plan and call these. Reentrant.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/launchers.h"
#include "kernels/math_ops.h"

namespace ndserve::kernels::gpu {

enum class MathUnaryCode : int {
  kSqrt,
  kExp,
  kLog,
  kReciprocal,
  kFloor,
  kCeil,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kRound,
  kSoftplus,
  kSign,  // FP32, INT32, INT64
  kNeg,  // FP32, INT32, INT64
  kAbs,  // FP32, INT32, INT64
  kLeakyRelu,
  kElu,
  kSelu,  // alpha, beta = gamma
  kCelu,
  kHardSigmoid,
  kHardSwish,
  kClip,  // alpha = min, beta = max
  kNot,   // BOOL
  kIsNaN,  // FP32 in, BOOL out
  kIsInf,  // FP32 in, BOOL out; alpha != 0: detect negative, beta != 0: detect positive
};
// y[i] = op(x[i]); `type` is the element type of x and y (FP32 unless noted above);
// alpha and beta are the op's parameters (ActivationAttrs, ClipAttrs).
cudaError_t LaunchMathUnary(MathUnaryCode op, ScalarType type, const void* x, void* y, int64_t n,
                            float alpha, float beta, cudaStream_t stream);

enum class MathBinaryCode : int {
  kPRelu,  // FP32 x, FP32 slope
  kPow,    // FP32 base; b_type FP32, INT32 or INT64; FP32 out
  kMod,    // INT32 or INT64 for both operands and the output (the divisor's sign)
  kFmod,   // FP32, INT32 or INT64 (the dividend's sign)
  kMin,    // a_type FP32, INT32 or INT64 for both operands and the output
  kMax,
  kEqual,  // a_type FP32, INT32, INT64 or BOOL for both operands; BOOL out
  kLess,   // a_type FP32, INT32 or INT64; BOOL out
  kGreater,
  kLessOrEqual,
  kGreaterOrEqual,
  kAnd,  // BOOL
  kOr,
  kXor,
};
// out[i] = op(a[map0(i)], b[map1(i)]).
cudaError_t LaunchMathBinary(MathBinaryCode op, ScalarType a_type, ScalarType b_type, const void* a,
                             const void* b, void* out, const IndexMap& map, int64_t n,
                             cudaStream_t stream);
// out[i] = cond[cond_x0(i)] ? x[cond_x1(i)] : y[y_map0(i)], elements of 1, 2, 4 or 8 bytes.
// Two maps over the same dims because an IndexMap carries two operands' strides.
cudaError_t LaunchWhere(const uint8_t* cond, const void* x, const void* y, void* out,
                        int elem_bytes, const IndexMap& cond_x, const IndexMap& y_map, int64_t n,
                        cudaStream_t stream);

// Reductions over the merged dims of a ReducePlan, as LaunchReduce: y[o] = max (min) over
// r of x[kept0(o) + reduced0(r)], FP32, INT32 or INT64; an empty reduction (reduce_n 0)
// gives -inf (+inf) or the type's lowest (highest) value.
cudaError_t LaunchReduceMinMax(bool is_max, ScalarType type, const void* x, void* y,
                               const IndexMap& kept, const IndexMap& reduced, int64_t out_n,
                               int64_t reduce_n, cudaStream_t stream);
// Along the middle dim of [outer, axis_dim, inner] (AxisPlan), FP32, INT32 or INT64.
// ReduceL2, ReduceSumSquare, ReduceLogSumExp or ReduceProd (FP32): y[o] folds
// x[kept(o) + reduced(r)] for r < reduce_n (kernels/math_ops.h FoldReduceValues).
cudaError_t LaunchFoldReduce(FoldReduce kind, const float* x, float* y, const IndexMap& kept,
                             const IndexMap& reduced, int64_t out_n, int64_t reduce_n,
                             cudaStream_t stream);
// ReduceProd (`product`) or ReduceSum of INT64 (else INT32) values, wrapping on overflow
// like the CPU's (kernels/math_ops.h WrappingMul, WrappingAdd).
cudaError_t LaunchIntegerReduce(bool product, bool int64, const void* x, void* y,
                                const IndexMap& kept, const IndexMap& reduced, int64_t out_n,
                                int64_t reduce_n, cudaStream_t stream);
// ArgMin with largest false.
cudaError_t LaunchArgMax(ScalarType type, const void* x, int64_t* y, int64_t outer,
                         int64_t axis_dim, int64_t inner, bool select_last, bool largest,
                         cudaStream_t stream);
// Values and indices are [outer, k, inner], best first.
cudaError_t LaunchTopK(ScalarType type, const void* x, void* values, int64_t* indices,
                       int64_t outer, int64_t axis_dim, int64_t inner, int64_t k, bool largest,
                       cudaStream_t stream);
cudaError_t LaunchCumSum(ScalarType type, const void* x, void* y, int64_t outer, int64_t axis_dim,
                         int64_t inner, bool exclusive, bool reverse, cudaStream_t stream);
cudaError_t LaunchLogSoftmax(const float* x, float* y, int64_t outer, int64_t axis_dim,
                             int64_t inner, cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_MATH_LAUNCHERS_H_
