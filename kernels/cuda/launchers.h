#ifndef NDSERVE_KERNELS_CUDA_LAUNCHERS_H_
#define NDSERVE_KERNELS_CUDA_LAUNCHERS_H_

// Raw launchers of the .cu kernels: plain pointers and sizes in, cudaError_t out (the
// launch's cudaGetLastError). They include no Abseil so nvcc stays fast; the Status-
// returning entry points in cuda_kernels.h validate, plan and call these. Each queues
// work on `stream` and returns at once; n == 0 launches nothing. Reentrant.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ndserve::kernels::gpu {

inline constexpr int kMaxRank = 8;

// A strided walk over up to kMaxRank merged dims for up to two operands: linear output
// index i -> multi-index over dims -> sum(idx[d] * strides[k][d]) for operand k.
struct IndexMap {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[2][kMaxRank] = {};
};

enum class BinaryCode : int { kAdd, kSub, kMul, kDiv };
enum class UnaryCode : int { kRelu, kSigmoid, kTanh, kErf };
// Same order as ndserve::DType's first 13 values (checked by a static_assert where the
// two meet).
enum class ScalarType : int {
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kBf16,
  kFp32,
  kFp64,
};

// out[i] = op(a[map0(i)], b[map1(i)]) for FP32, INT32, INT64.
cudaError_t LaunchBinary(BinaryCode op, ScalarType type, const void* a, const void* b, void* out,
                         const IndexMap& map, int64_t n, cudaStream_t stream);
cudaError_t LaunchUnary(UnaryCode op, const float* x, float* y, int64_t n, cudaStream_t stream);
// y[i] = beta * c[map0(i)] (Gemm's C term).
cudaError_t LaunchScaledBroadcast(const float* c, float beta, float* y, const IndexMap& map,
                                  int64_t n, cudaStream_t stream);
cudaError_t LaunchCast(ScalarType from, ScalarType to, const void* x, void* y, int64_t n,
                       cudaStream_t stream);
cudaError_t LaunchSoftmax(const float* x, float* y, int64_t outer, int64_t axis_dim, int64_t inner,
                          cudaStream_t stream);
// mean / inv_std may be null.
cudaError_t LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y,
                            float* mean, float* inv_std, int64_t rows, int64_t cols, float epsilon,
                            cudaStream_t stream);
// ScatterND into `out` (already a copy of data): `tuples` INT64 index tuples of k
// coordinates (negative ones count from the end), each naming `slice` elements.
struct ScatterNDArgs {
  int64_t tuples = 0, slice = 1;
  int k = 0;
  int64_t dims[kMaxRank] = {};           // data's first k dims
  int64_t slice_strides[kMaxRank] = {};  // slices per step of each coordinate
};
// reduction: 0 none (any fixed-size element, by elem_bytes), 1 add, 2 mul (FP32, INT32,
// INT64 by type). An out-of-range tuple sets *error_flag = 1 and is skipped.
cudaError_t LaunchScatterND(int reduction, ScalarType type, int elem_bytes, const int64_t* indices,
                            const void* updates, void* out, const ScatterNDArgs& a,
                            int32_t* error_flag, cudaStream_t stream);
// GatherElements / ScatterElements (kernels/plans.h's ElementsPlan): `base` maps an
// index's position to the non-axis part of its data offset (strides[0]: data's strides,
// 0 along the axis); the index adds index * axis_stride. Indices are INT32 or INT64;
// negative ones count from the end of the axis.
struct ElementsArgs {
  IndexMap base;
  int64_t count = 0, axis_dim = 0, axis_stride = 1;
  int64_t lines = 0, line_len = 0, inner = 1;  // see ElementsPlan
  bool int64_indices = true;
};
// out[i] = data[base(i) + index * axis_stride] for `elem_bytes`-byte elements; an
// out-of-range index sets *error_flag = 1 and gives 0.
cudaError_t LaunchGatherElements(const void* data, int elem_bytes, const void* indices, void* out,
                                 const ElementsArgs& a, int32_t* error_flag, cudaStream_t stream);
// Into `out` (already a copy of data): reduction 0 writes each update (one thread each; a
// repeated target's winner is open, as ONNX leaves it), 1 adds and 2 multiplies (FP32,
// INT32, INT64 by type; one thread per line of the axis folds its updates in order, so
// results round as on the CPU). An out-of-range index sets *error_flag = 1 and its update
// is dropped.
cudaError_t LaunchScatterElements(int reduction, ScalarType type, int elem_bytes,
                                  const void* indices, const void* updates, void* out,
                                  const ElementsArgs& a, int32_t* error_flag,
                                  cudaStream_t stream);
// OneHot over [outer, depth, inner] (OneHotAttrs): y = on where the class is the index of
// indices[outer, inner], off elsewhere; FP32, INT32 or INT64 out.
struct OneHotArgs {
  int64_t outer = 0, depth = 1, inner = 1;
  double off = 0.0, on = 1.0;
};
cudaError_t LaunchOneHot(ScalarType type, const void* indices, bool int64_indices, void* out,
                         const OneHotArgs& a, cudaStream_t stream);
// Out-of-range indices set *error_flag = 1 and give zero rows (no out-of-bounds read).
cudaError_t LaunchGather(const void* data, int elem_bytes, const void* indices, bool int64_indices,
                         void* out, int64_t outer, int64_t axis_dim, int64_t inner, int64_t count,
                         int32_t* error_flag, cudaStream_t stream);
// The fused embedding bag (GatherAttrs::bag_mean): out[b, d] = (sum over k < bag of
// table[ids[b * stride + k], d]) * (1 / bag), ids counted from the end when negative;
// an id outside [0, rows) zeroes its outputs and raises *error_flag.
cudaError_t LaunchBagMean(const float* table, const void* ids, bool int64_ids, float* out,
                          int64_t rows, int64_t dim, int64_t batch, int64_t bag, int64_t stride,
                          int32_t* error_flag, cudaStream_t stream);
// y[o] = scale * sum over r of x[kept0(o) + reduced0(r)].
cudaError_t LaunchReduce(const float* x, float* y, const IndexMap& kept, const IndexMap& reduced,
                         int64_t out_n, int64_t reduce_n, float scale, cudaStream_t stream);
// y[i] = x[map0(i)] for 1, 2, 4 or 8-byte elements.
cudaError_t LaunchTranspose(const void* x, void* y, int elem_bytes, const IndexMap& map, int64_t n,
                            cudaStream_t stream);

}  // namespace ndserve::kernels::gpu

#endif  // NDSERVE_KERNELS_CUDA_LAUNCHERS_H_
