#include "kernels/gpu_resources.h"

#include "absl/strings/str_cat.h"
#include "memory/cuda_runtime.h"
#ifdef NDSERVE_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif

namespace ndserve::kernels {

#ifdef NDSERVE_WITH_CUDA
namespace {

absl::Status CudaError(cudaError_t err, absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(err)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuResources>> GpuResources::Create(Device device) {
  if (!device.is_cuda() || device.ordinal < 0 || device.ordinal >= CudaDeviceCount()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device ", device.ToString(), " (", CudaDeviceCount(), " present)"));
  }
  std::unique_ptr<GpuResources> r(new GpuResources(device));
  if (cudaError_t err = cudaSetDevice(device.ordinal); err != cudaSuccess) {
    return CudaError(err, "cudaSetDevice");
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      err != cudaSuccess) {
    return CudaError(err, "cudaStreamCreate");
  }
  r->context_.cuda_stream = stream;
  void* flag = nullptr;
  if (cudaError_t err = cudaHostAlloc(&flag, sizeof(int32_t), cudaHostAllocMapped);
      err != cudaSuccess) {
    return CudaError(err, "cudaHostAlloc(error flag)");
  }
  r->context_.error_flag = static_cast<int32_t*>(flag);
  *r->context_.error_flag = 0;
  cublasHandle_t handle = nullptr;
  if (cublasStatus_t st = cublasCreate(&handle); st != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasCreate failed with status ", st));
  }
  r->context_.cublas_handle = handle;
  if (cublasStatus_t st = cublasSetStream(handle, stream); st != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasSetStream failed with status ", st));
  }
  return r;
}

GpuResources::~GpuResources() {
  cudaSetDevice(context_.device.ordinal);
  auto stream = static_cast<cudaStream_t>(context_.cuda_stream);
  if (stream != nullptr) cudaStreamSynchronize(stream);
  if (context_.cublas_handle != nullptr) {
    cublasDestroy(static_cast<cublasHandle_t>(context_.cublas_handle));
  }
  if (context_.error_flag != nullptr) cudaFreeHost(context_.error_flag);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

absl::Status GpuResources::Synchronize() {
  cudaSetDevice(context_.device.ordinal);
  if (cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t>(context_.cuda_stream));
      err != cudaSuccess) {
    return CudaError(err, "cudaStreamSynchronize");
  }
  return absl::OkStatus();
}

#else  // !NDSERVE_WITH_CUDA

absl::StatusOr<std::unique_ptr<GpuResources>> GpuResources::Create(Device device) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot use ", device.ToString(), ": built without the CUDA backend"));
}

GpuResources::~GpuResources() = default;

absl::Status GpuResources::Synchronize() { return absl::OkStatus(); }

#endif  // NDSERVE_WITH_CUDA

}  // namespace ndserve::kernels
