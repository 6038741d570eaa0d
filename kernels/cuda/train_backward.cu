// Backward and loss kernels for training (kernels/train_kernels.h). Grid-stride loops;
// row-wise work (softmax, cross-entropy, LayerNorm) is one block per row with a shared-
// memory sum, column sums one thread per column (coalesced across the row).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_util.cuh"
#include "kernels/cuda/train_launchers.h"

namespace ndserve::kernels::gpu {
namespace {

// The sum of v over the block (blockDim.x a multiple of 32, at most 1024); every thread
// gets it. `scratch` holds 32 floats.
__device__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  float total = lane < warps ? scratch[lane] : 0.0f;
  total = WarpSum(total);
  return total;
}

__device__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  float m = lane < warps ? scratch[lane] : -INFINITY;
  return WarpMax(m);
}

__device__ __forceinline__ void Put(float* dst, float value, bool accumulate) {
  *dst = accumulate ? *dst + value : value;
}

__global__ void ActivationBackwardKernel(int kind, const float* saved, const float* dy, float* dx,
                                         int64_t n, bool accumulate) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const float s = saved[i];
    float d;
    if (kind == 0) {
      d = s > 0.0f ? dy[i] : 0.0f;
    } else if (kind == 1) {
      d = dy[i] * s * (1.0f - s);
    } else {
      d = dy[i] * (1.0f - s * s);
    }
    Put(dx + i, d, accumulate);
  }
}

__global__ void SoftmaxBackwardKernel(bool log, const float* y, const float* dy, float* dx,
                                      int64_t cols, bool accumulate) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* yr = y + r * cols;
  const float* gr = dy + r * cols;
  float* dr = dx + r * cols;
  float dot = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += log ? gr[j] : gr[j] * yr[j];
  dot = BlockSum(dot, scratch);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    Put(dr + j, log ? gr[j] - expf(yr[j]) * dot : yr[j] * (gr[j] - dot), accumulate);
  }
}

__global__ void CrossEntropyKernel(const float* x, const int64_t* labels, int64_t rows,
                                   int64_t cols, float* loss, float* grad, int32_t* error_flag) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  float* gr = grad + r * cols;
  const int64_t label = labels[r];
  const bool bad = label < 0 || label >= cols;
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) mx = fmaxf(mx, xr[j]);
  mx = BlockMax(mx, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(xr[j] - mx);
  sum = BlockSum(sum, scratch);
  const float lse = mx + logf(sum);
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    gr[j] = bad ? 0.0f : (expf(xr[j] - lse) - (j == label ? 1.0f : 0.0f)) * inv_rows;
  }
  if (threadIdx.x == 0) {
    if (bad) {
      *error_flag = 1;
    } else {
      atomicAdd(loss, (lse - xr[label]) * inv_rows);
    }
  }
}

__global__ void ElementwiseLossKernel(int kind, const float* x, const float* t, int64_t n,
                                      float* loss, float* grad) {
  __shared__ float scratch[32];
  const float inv_n = 1.0f / static_cast<float>(n);
  float part = 0.0f;
  for (int64_t e = GlobalThread(); e < n; e += GridThreads()) {
    if (kind == 1) {
      part += fmaxf(x[e], 0.0f) - x[e] * t[e] + log1pf(expf(-fabsf(x[e])));
      grad[e] = (1.0f / (1.0f + expf(-x[e])) - t[e]) * inv_n;
    } else {
      const float diff = x[e] - t[e];
      part += diff * diff;
      grad[e] = 2.0f * diff * inv_n;
    }
  }
  part = BlockSum(part, scratch);
  if (threadIdx.x == 0) atomicAdd(loss, part * inv_n);
}

__global__ void SumRowsKernel(const float* src, int64_t rows, int64_t cols, float* dst,
                              bool accumulate) {
  for (int64_t j = GlobalThread(); j < cols; j += GridThreads()) {
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r) sum += src[r * cols + j];
    Put(dst + j, sum, accumulate);
  }
}

__global__ void AddRowsKernel(const int64_t* ids, int64_t count, const float* grad, int64_t width,
                              float* table_grad, int64_t table_rows, int32_t* error_flag) {
  const int64_t n = count * width;
  for (int64_t e = GlobalThread(); e < n; e += GridThreads()) {
    const int64_t i = e / width;
    int64_t id = ids[i];
    if (id < -table_rows || id >= table_rows) {
      *error_flag = 1;
      continue;
    }
    if (id < 0) id += table_rows;  // counts from the end, as in ONNX Gather
    // Repeated ids add up in any order: the sort-free scatter.
    atomicAdd(table_grad + id * width + (e - i * width), grad[e]);
  }
}

__global__ void LayerNormDxKernel(const float* xhat, const float* scale, const float* inv_std,
                                  const float* dy, int64_t cols, float* dx, bool accumulate) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const float* hr = xhat + r * cols;
  const float* gr = dy + r * cols;
  float sum_g = 0.0f, sum_gh = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float g = gr[j] * scale[j];
    sum_g += g;
    sum_gh += g * hr[j];
  }
  sum_g = BlockSum(sum_g, scratch);
  sum_gh = BlockSum(sum_gh, scratch);
  const float inv_cols = 1.0f / static_cast<float>(cols);
  const float is = inv_std[r];
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float g = gr[j] * scale[j];
    Put(dx + r * cols + j, is * (g - inv_cols * sum_g - hr[j] * inv_cols * sum_gh), accumulate);
  }
}

__global__ void LayerNormParamKernel(const float* xhat, const float* dy, int64_t rows, int64_t cols,
                                     float* dscale, float* dbias, bool accumulate) {
  for (int64_t j = GlobalThread(); j < cols; j += GridThreads()) {
    float ds = 0.0f, db = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float g = dy[r * cols + j];
      ds += g * xhat[r * cols + j];
      db += g;
    }
    if (dscale != nullptr) Put(dscale + j, ds, accumulate);
    if (dbias != nullptr) Put(dbias + j, db, accumulate);
  }
}

__global__ void SumSquaresKernel(const float* x, int64_t n, float* out) {
  __shared__ float scratch[32];
  float part = 0.0f;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) part += x[i] * x[i];
  part = BlockSum(part, scratch);
  if (threadIdx.x == 0) atomicAdd(out, part);
}

__global__ void SumSquaresRowsKernel(const float* x, const int64_t* rows, int64_t count,
                                     int64_t width, float* out) {
  __shared__ float scratch[32];
  float part = 0.0f;
  const int64_t n = count * width;
  for (int64_t e = GlobalThread(); e < n; e += GridThreads()) {
    const int64_t i = e / width;
    const float v = x[rows[i] * width + (e - i * width)];
    part += v * v;
  }
  part = BlockSum(part, scratch);
  if (threadIdx.x == 0) atomicAdd(out, part);
}

// Rows are grid blocks: CUDA allows 2^31 - 1 of them.
bool RowsFit(int64_t rows) { return rows <= 0x7fffffff; }

}  // namespace

cudaError_t LaunchActivationBackward(int kind, const float* saved, const float* dy, float* dx,
                                     int64_t n, bool accumulate, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ActivationBackwardKernel<<<GridFor(n), kBlock, 0, stream>>>(kind, saved, dy, dx, n, accumulate);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxBackward(bool log, const float* y, const float* dy, float* dx,
                                  int64_t rows, int64_t cols, bool accumulate,
                                  cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (!RowsFit(rows)) return cudaErrorInvalidConfiguration;
  SoftmaxBackwardKernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(log, y, dy, dx, cols,
                                                                            accumulate);
  return cudaGetLastError();
}

cudaError_t LaunchCrossEntropy(const float* x, const int64_t* labels, int64_t rows, int64_t cols,
                               float* loss, float* grad, int32_t* error_flag, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (!RowsFit(rows)) return cudaErrorInvalidConfiguration;
  CrossEntropyKernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(x, labels, rows, cols,
                                                                         loss, grad, error_flag);
  return cudaGetLastError();
}

cudaError_t LaunchElementwiseLoss(int kind, const float* x, const float* t, int64_t n, float* loss,
                                  float* grad, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ElementwiseLossKernel<<<GridFor(n), kBlock, 0, stream>>>(kind, x, t, n, loss, grad);
  return cudaGetLastError();
}

cudaError_t LaunchSumRows(const float* src, int64_t rows, int64_t cols, float* dst, bool accumulate,
                          cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  SumRowsKernel<<<GridFor(cols), kBlock, 0, stream>>>(src, rows, cols, dst, accumulate);
  return cudaGetLastError();
}

cudaError_t LaunchAddRows(const int64_t* ids, int64_t count, const float* grad, int64_t width,
                          float* table_grad, int64_t table_rows, int32_t* error_flag,
                          cudaStream_t stream) {
  const int64_t n = count * width;
  if (n == 0) return cudaSuccess;
  AddRowsKernel<<<GridFor(n), kBlock, 0, stream>>>(ids, count, grad, width, table_grad, table_rows,
                                                   error_flag);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNormBackward(const float* xhat, const float* scale, const float* inv_std,
                                    const float* dy, int64_t rows, int64_t cols, float* dx,
                                    float* dscale, float* dbias, bool accumulate,
                                    cudaStream_t stream) {
  if (cols == 0) return cudaSuccess;
  if (rows == 0) {
    // Sums over no rows: the scale and bias gradients are zero when not accumulating, as
    // the CPU table writes them.
    for (float* p : {dscale, dbias}) {
      if (p == nullptr || accumulate) continue;
      if (cudaError_t err = cudaMemsetAsync(p, 0, cols * sizeof(float), stream); err != cudaSuccess) {
        return err;
      }
    }
    return cudaSuccess;
  }
  if (!RowsFit(rows)) return cudaErrorInvalidConfiguration;
  if (dx != nullptr) {
    LayerNormDxKernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(xhat, scale, inv_std, dy,
                                                                          cols, dx, accumulate);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  if (dscale == nullptr && dbias == nullptr) return cudaSuccess;
  LayerNormParamKernel<<<GridFor(cols), kBlock, 0, stream>>>(xhat, dy, rows, cols, dscale, dbias,
                                                             accumulate);
  return cudaGetLastError();
}

cudaError_t LaunchSumSquares(const float* x, int64_t n, float* out, bool accumulate,
                             cudaStream_t stream) {
  if (!accumulate) {
    if (cudaError_t err = cudaMemsetAsync(out, 0, sizeof(float), stream); err != cudaSuccess) {
      return err;
    }
  }
  if (n == 0) return cudaSuccess;
  SumSquaresKernel<<<GridFor(n), kBlock, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

cudaError_t LaunchSumSquaresRows(const float* x, const int64_t* rows, int64_t count, int64_t width,
                                 float* out, bool accumulate, cudaStream_t stream) {
  if (!accumulate) {
    if (cudaError_t err = cudaMemsetAsync(out, 0, sizeof(float), stream); err != cudaSuccess) {
      return err;
    }
  }
  const int64_t n = count * width;
  if (n == 0) return cudaSuccess;
  SumSquaresRowsKernel<<<GridFor(n), kBlock, 0, stream>>>(x, rows, count, width, out);
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
