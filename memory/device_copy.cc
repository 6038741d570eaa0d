#include "memory/device_copy.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "memory/cuda_runtime.h"

#ifdef NDSERVE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ndserve {
namespace {

enum class Direction { kToDevice, kToHost, kZero };

absl::Status CudaCopy(Device device, Direction direction, void* dst, const void* src,
                      std::size_t bytes) {
  if (device.ordinal < 0 || device.ordinal >= CudaDeviceCount()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device ", device.ToString(), " to copy to or from"));
  }
#ifdef NDSERVE_WITH_CUDA
  cudaError_t err = cudaSetDevice(device.ordinal);
  if (err == cudaSuccess) {
    switch (direction) {
      case Direction::kToDevice:
        err = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
        break;
      case Direction::kToHost:
        err = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
        break;
      case Direction::kZero:
        err = cudaMemset(dst, 0, bytes);
        break;
    }
  }
  if (err == cudaSuccess && direction != Direction::kToHost) {
    // A pageable-memory upload and a memset may return before the device has the data,
    // and they run on the legacy stream, which the predictors' non-blocking streams do
    // not wait for: finish them here so no kernel can read the bytes early.
    err = cudaStreamSynchronize(cudaStreamLegacy);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("CUDA copy of ", bytes, " bytes on ", device.ToString(),
                                            ": ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
#else
  (void)direction, (void)dst, (void)src, (void)bytes;
  return absl::FailedPreconditionError("this build of ndserve has no CUDA backend");
#endif
}

absl::Status CudaCopyOnStream(Device device, bool to_device, void* dst, const void* src,
                              std::size_t bytes, void* cuda_stream) {
  if (device.ordinal < 0 || device.ordinal >= CudaDeviceCount()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device ", device.ToString(), " to copy to or from"));
  }
#ifdef NDSERVE_WITH_CUDA
  auto stream = static_cast<cudaStream_t>(cuda_stream);
  cudaError_t err = cudaSetDevice(device.ordinal);
  if (err == cudaSuccess) {
    err = cudaMemcpyAsync(dst, src, bytes,
                          to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream);
  }
  // A pageable destination makes the download synchronous already; a pinned one would
  // not be, and the caller reads the bytes next.
  if (err == cudaSuccess && !to_device) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return absl::InternalError(absl::StrCat("CUDA copy of ", bytes, " bytes on ", device.ToString(),
                                            ": ", cudaGetErrorString(err)));
  }
  return absl::OkStatus();
#else
  (void)to_device, (void)dst, (void)src, (void)bytes, (void)cuda_stream;
  return absl::FailedPreconditionError("this build of ndserve has no CUDA backend");
#endif
}

}  // namespace

absl::Status CopyHostToDeviceOnStream(Device device, void* device_dst, const void* host_src,
                                      std::size_t bytes, void* cuda_stream) {
  if (!device.is_cuda() || cuda_stream == nullptr) {
    return CopyHostToDevice(device, device_dst, host_src, bytes);
  }
  if (bytes == 0) return absl::OkStatus();
  return CudaCopyOnStream(device, true, device_dst, host_src, bytes, cuda_stream);
}

absl::Status CopyDeviceToHostOnStream(Device device, void* host_dst, const void* device_src,
                                      std::size_t bytes, void* cuda_stream) {
  if (!device.is_cuda() || cuda_stream == nullptr) {
    return CopyDeviceToHost(device, host_dst, device_src, bytes);
  }
  if (bytes == 0) return absl::OkStatus();
  return CudaCopyOnStream(device, false, host_dst, device_src, bytes, cuda_stream);
}

absl::Status CopyHostToDevice(Device device, void* device_dst, const void* host_src,
                              std::size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (!device.is_cuda()) {
    std::memcpy(device_dst, host_src, bytes);
    return absl::OkStatus();
  }
  return CudaCopy(device, Direction::kToDevice, device_dst, host_src, bytes);
}

absl::Status CopyDeviceToHost(Device device, void* host_dst, const void* device_src,
                              std::size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (!device.is_cuda()) {
    std::memcpy(host_dst, device_src, bytes);
    return absl::OkStatus();
  }
  return CudaCopy(device, Direction::kToHost, host_dst, device_src, bytes);
}

absl::Status FillZero(Device device, void* device_dst, std::size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (!device.is_cuda()) {
    std::memset(device_dst, 0, bytes);
    return absl::OkStatus();
  }
  return CudaCopy(device, Direction::kZero, device_dst, nullptr, bytes);
}

}  // namespace ndserve
