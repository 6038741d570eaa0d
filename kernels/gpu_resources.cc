#include "kernels/gpu_resources.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "memory/cuda_runtime.h"
#include "memory/device_copy.h"
#ifdef NDSERVE_WITH_CUDA
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/cublas_util.h"
#include "kernels/cuda/cuda_util.h"
#endif

namespace ndserve::kernels {

namespace {
std::atomic<uint64_t> cublaslt_epilogue_gemms{0};
}  // namespace

uint64_t CublasLtEpilogueGemms() { return cublaslt_epilogue_gemms.load(std::memory_order_relaxed); }
void CountCublasLtEpilogueGemm() { cublaslt_epilogue_gemms.fetch_add(1, std::memory_order_relaxed); }

void GpuResources::DisableDefaultCublasWorkspace() {
  static std::once_flag once;
  std::call_once(once, [] { setenv("CUBLAS_WORKSPACE_CONFIG", ":0:0", /*overwrite=*/0); });
}

#ifdef NDSERVE_WITH_CUDA
namespace {

// Out of memory is RESOURCE_EXHAUSTED, anything else INTERNAL naming the call: the
// mapping of every CUDA entry point (kernels/cuda/cuda_util.h, cublas_util.h).
using gpu::CublasStatus;
using gpu::CudaStatus;
using gpu::StreamOf;

}  // namespace

absl::StatusOr<std::unique_ptr<GpuResources>> GpuResources::Create(Device device, int error_slots) {
  if (!device.is_cuda() || device.ordinal < 0 || device.ordinal >= CudaDeviceCount()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA device ", device.ToString(), " (", CudaDeviceCount(), " present)"));
  }
  DisableDefaultCublasWorkspace();  // before the first cublasCreate reads it
  std::unique_ptr<GpuResources> r(new GpuResources(device));
  r->error_slots_ = std::max(error_slots, 1);
  if (cudaError_t err = cudaSetDevice(device.ordinal); err != cudaSuccess) {
    return CudaStatus(err, "cudaSetDevice");
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      err != cudaSuccess) {
    return CudaStatus(err, "cudaStreamCreate");
  }
  r->context_.cuda_stream = stream;
  void* flag = nullptr;
  if (cudaError_t err =
          cudaHostAlloc(&flag, sizeof(int32_t) * r->error_slots_, cudaHostAllocMapped);
      err != cudaSuccess) {
    return CudaStatus(err, "cudaHostAlloc(error flags)");
  }
  r->context_.error_flag = static_cast<int32_t*>(flag);
  r->ClearErrorFlags();
  cublasHandle_t handle = nullptr;
  if (cublasStatus_t st = cublasCreate(&handle); st != CUBLAS_STATUS_SUCCESS) {
    return CublasStatus(st, "cublasCreate");
  }
  r->context_.cublas_handle = handle;
  cublasLtHandle_t lt = nullptr;
  if (cublasStatus_t st = cublasLtCreate(&lt); st != CUBLAS_STATUS_SUCCESS) {
    return CublasStatus(st, "cublasLtCreate");
  }
  r->cublaslt_handle_ = lt;
  r->context_.cublaslt_handle = lt;
  if (cublasStatus_t st = cublasSetStream(handle, stream); st != CUBLAS_STATUS_SUCCESS) {
    return CublasStatus(st, "cublasSetStream");
  }
  return r;
}

GpuResources::~GpuResources() {
  cudaSetDevice(context_.device.ordinal);
  auto stream = StreamOf(context_);
  if (stream != nullptr) cudaStreamSynchronize(stream);
  if (cublaslt_handle_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(cublaslt_handle_));
  if (context_.cublas_handle != nullptr) {
    cublasDestroy(static_cast<cublasHandle_t>(context_.cublas_handle));
  }
  if (context_.error_flag != nullptr) cudaFreeHost(context_.error_flag);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

void GpuResources::ClearErrorFlags() {
  std::memset(context_.error_flag, 0, sizeof(int32_t) * error_slots_);
}

int GpuResources::FirstRaisedErrorFlag() const {
  const volatile int32_t* flags = context_.error_flag;
  for (int i = 0; i < error_slots_; ++i) {
    if (flags[i] != 0) return i;
  }
  return -1;
}

absl::Status GpuResources::Synchronize() {
  ++counters_.syncs;
  cudaSetDevice(context_.device.ordinal);
  if (cudaError_t err = cudaStreamSynchronize(StreamOf(context_)); err != cudaSuccess) {
    return CudaStatus(err, "cudaStreamSynchronize");
  }
  return absl::OkStatus();
}

absl::Status GpuResources::CopyToDevice(void* device_dst, const void* host_src, std::size_t bytes) {
  ++counters_.h2d_copies;
  return CopyHostToDeviceOnStream(context_.device, device_dst, host_src, bytes,
                                  StreamOf(context_));
}

absl::Status GpuResources::CopyToHost(void* host_dst, const void* device_src, std::size_t bytes) {
  ++counters_.d2h_copies;
  if (bytes == 0) return absl::OkStatus();
  if (cudaError_t err =
          cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, StreamOf(context_));
      err != cudaSuccess) {
    return CudaStatus(err, "cudaMemcpyAsync(device to host)");
  }
  return absl::OkStatus();
}

absl::Status GpuResources::FillZero(void* device_dst, std::size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (cudaError_t err = cudaMemsetAsync(device_dst, 0, bytes, StreamOf(context_));
      err != cudaSuccess) {
    return CudaStatus(err, "cudaMemsetAsync");
  }
  return absl::OkStatus();
}

absl::Status GpuResources::SetCublasWorkspace(void* ptr, std::size_t bytes) {
  context_.cublas_workspace = ptr;
  context_.cublas_workspace_bytes = bytes;
  return CublasStatus(
      cublasSetWorkspace(static_cast<cublasHandle_t>(context_.cublas_handle), ptr, bytes),
      "cublasSetWorkspace");
}

void GpuResources::SetCublasLt(bool on) {
  context_.cublaslt_handle = on ? cublaslt_handle_ : nullptr;
}

absl::Status GpuResources::SetTf32(bool on) {
  context_.tf32 = on;
  return CublasStatus(cublasSetMathMode(static_cast<cublasHandle_t>(context_.cublas_handle),
                                       on ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                     "cublasSetMathMode");
}

absl::Status GpuResources::BeginCapture() {
  cudaSetDevice(context_.device.ordinal);
  // Relaxed: a pool miss inside the capture may cudaMalloc (the block then belongs to
  // the captured run's scope for the graph's lifetime); the thread-local mode refuses
  // that call and loses the capture.
  if (cudaError_t err =
          cudaStreamBeginCapture(StreamOf(context_), cudaStreamCaptureModeRelaxed);
      err != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(err, "cudaStreamBeginCapture");
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> GpuResources::EndCapture() {
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(StreamOf(context_), &graph);
  if (err != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();  // an invalidated capture is not a sticky error; clear it
    return CudaStatus(err == cudaSuccess ? cudaErrorStreamCaptureInvalidated : err,
                     "cudaStreamEndCapture");
  }
  cudaGraphExec_t exec = nullptr;
  err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  if (err != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(err, "cudaGraphInstantiate");
  }
  return static_cast<void*>(exec);
}

void GpuResources::AbortCapture() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(StreamOf(context_), &status) == cudaSuccess &&
      status == cudaStreamCaptureStatusNone) {
    cudaGetLastError();
    return;
  }
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(StreamOf(context_), &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
}

absl::Status GpuResources::LaunchGraph(void* graph) {
  ++counters_.graph_launches;
  if (cudaError_t err = cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), StreamOf(context_));
      err != cudaSuccess) {
    return CudaStatus(err, "cudaGraphLaunch");
  }
  return absl::OkStatus();
}

void GpuResources::DestroyGraph(void* graph) {
  if (graph != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

#else  // !NDSERVE_WITH_CUDA

absl::StatusOr<std::unique_ptr<GpuResources>> GpuResources::Create(Device device, int) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot use ", device.ToString(), ": built without the CUDA backend"));
}

GpuResources::~GpuResources() = default;

namespace {
absl::Status NoCuda() { return absl::FailedPreconditionError("built without the CUDA backend"); }
}  // namespace

void GpuResources::ClearErrorFlags() {}
int GpuResources::FirstRaisedErrorFlag() const { return -1; }
absl::Status GpuResources::Synchronize() { return absl::OkStatus(); }
absl::Status GpuResources::CopyToDevice(void*, const void*, std::size_t) { return NoCuda(); }
absl::Status GpuResources::CopyToHost(void*, const void*, std::size_t) { return NoCuda(); }
absl::Status GpuResources::FillZero(void*, std::size_t) { return NoCuda(); }
absl::Status GpuResources::SetCublasWorkspace(void*, std::size_t) { return NoCuda(); }
absl::Status GpuResources::SetTf32(bool) { return NoCuda(); }
void GpuResources::SetCublasLt(bool) {}
absl::Status GpuResources::BeginCapture() { return NoCuda(); }
absl::StatusOr<void*> GpuResources::EndCapture() { return NoCuda(); }
void GpuResources::AbortCapture() {}
absl::Status GpuResources::LaunchGraph(void*) { return NoCuda(); }
void GpuResources::DestroyGraph(void*) {}

#endif  // NDSERVE_WITH_CUDA

}  // namespace ndserve::kernels
