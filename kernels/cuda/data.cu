// Data-movement kernels: Fill (ConstantOfShape), Pad, Trilu and Range, one thread per
// output element over grid-stride loops. Elements move as unsigned integers of their size.
#include <cstring>

#include "kernels/cuda/data_launchers.h"
#include "kernels/cuda/device_util.cuh"

namespace ndserve::kernels::gpu {
namespace {

template <typename E>
__global__ void FillKernel(E* y, E value, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) y[i] = value;
}

__device__ __forceinline__ int64_t PadSource(int64_t o, int64_t begin, int64_t n, int mode) {
  const int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  if (mode == 0) return -1;
  if (mode == 2) return i < 0 ? 0 : n - 1;
  return i < 0 ? -i : 2 * (n - 1) - i;
}

template <typename E>
__global__ void PadKernel(const E* x, E* y, PadMap map, E fill, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    int64_t rest = i, offset = 0;
    bool inside = true;
    for (int d = map.rank - 1; d >= 0; --d) {
      const int64_t q = rest / map.out_dims[d];
      const int64_t src =
          PadSource(rest - q * map.out_dims[d], map.begin[d], map.in_dims[d], map.mode);
      rest = q;
      if (src < 0) {
        inside = false;
        break;
      }
      offset += src * map.in_strides[d];
    }
    y[i] = inside ? x[offset] : fill;
  }
}

template <typename E>
__global__ void TriluKernel(const E* x, E* y, int64_t rows, int64_t cols, bool upper, int64_t k,
                            int64_t n) {
  for (int64_t t = GlobalThread(); t < n; t += GridThreads()) {
    const int64_t j = t % cols;
    const int64_t i = (t / cols) % rows;
    const bool keep = upper ? j - i >= k : j - i <= k;
    y[t] = keep ? x[t] : E(0);
  }
}

template <typename T>
__global__ void RangeRealKernel(T* y, double start, double delta, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    // Explicit roundings: a contracted fma would differ from the CPU kernel's last bit.
    y[i] = static_cast<T>(__dadd_rn(start, __dmul_rn(static_cast<double>(i), delta)));
  }
}

template <typename T>
__global__ void RangeIntKernel(T* y, int64_t start, int64_t delta, int64_t n) {
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    y[i] = static_cast<T>(start + i * delta);
  }
}

template <typename E>
E FromBits(uint64_t bits) {
  E v;
  std::memcpy(&v, &bits, sizeof(E));
  return v;
}

template <typename E>
cudaError_t Fill(void* y, uint64_t bits, int64_t n, cudaStream_t stream) {
  FillKernel<E><<<GridFor(n), kBlock, 0, stream>>>(static_cast<E*>(y), FromBits<E>(bits), n);
  return cudaGetLastError();
}

template <typename E>
cudaError_t Pad(const void* x, void* y, const PadMap& map, uint64_t bits, int64_t n,
                cudaStream_t stream) {
  PadKernel<E><<<GridFor(n), kBlock, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(y), map,
                                                  FromBits<E>(bits), n);
  return cudaGetLastError();
}

template <typename E>
cudaError_t Trilu(const void* x, void* y, int64_t rows, int64_t cols, bool upper, int64_t k,
                  int64_t n, cudaStream_t stream) {
  TriluKernel<E><<<GridFor(n), kBlock, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(y),
                                                    rows, cols, upper, k, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchFill(void* y, int elem_bytes, uint64_t bits, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return Fill<uint8_t>(y, bits, n, stream);
    case 2:
      return Fill<uint16_t>(y, bits, n, stream);
    case 4:
      return Fill<uint32_t>(y, bits, n, stream);
    case 8:
      return Fill<uint64_t>(y, bits, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchPad(const void* x, void* y, int elem_bytes, const PadMap& map, uint64_t fill_bits,
                      int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return Pad<uint8_t>(x, y, map, fill_bits, n, stream);
    case 2:
      return Pad<uint16_t>(x, y, map, fill_bits, n, stream);
    case 4:
      return Pad<uint32_t>(x, y, map, fill_bits, n, stream);
    case 8:
      return Pad<uint64_t>(x, y, map, fill_bits, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchTrilu(const void* x, void* y, int elem_bytes, int64_t matrices, int64_t rows,
                        int64_t cols, bool upper, int64_t k, cudaStream_t stream) {
  const int64_t n = matrices * rows * cols;
  if (n == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1:
      return Trilu<uint8_t>(x, y, rows, cols, upper, k, n, stream);
    case 2:
      return Trilu<uint16_t>(x, y, rows, cols, upper, k, n, stream);
    case 4:
      return Trilu<uint32_t>(x, y, rows, cols, upper, k, n, stream);
    case 8:
      return Trilu<uint64_t>(x, y, rows, cols, upper, k, n, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchRange(ScalarType type, void* y, double start_real, double delta_real,
                        int64_t start_int, int64_t delta_int, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned grid = GridFor(n);
  switch (type) {
    case ScalarType::kFp32:
      RangeRealKernel<float>
          <<<grid, kBlock, 0, stream>>>(static_cast<float*>(y), start_real, delta_real, n);
      break;
    case ScalarType::kFp64:
      RangeRealKernel<double>
          <<<grid, kBlock, 0, stream>>>(static_cast<double*>(y), start_real, delta_real, n);
      break;
    case ScalarType::kInt16:
      RangeIntKernel<int16_t>
          <<<grid, kBlock, 0, stream>>>(static_cast<int16_t*>(y), start_int, delta_int, n);
      break;
    case ScalarType::kInt32:
      RangeIntKernel<int32_t>
          <<<grid, kBlock, 0, stream>>>(static_cast<int32_t*>(y), start_int, delta_int, n);
      break;
    case ScalarType::kInt64:
      RangeIntKernel<int64_t>
          <<<grid, kBlock, 0, stream>>>(static_cast<int64_t*>(y), start_int, delta_int, n);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace ndserve::kernels::gpu
