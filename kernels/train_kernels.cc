#include "kernels/train_kernels.h"

#include "absl/strings/str_cat.h"

namespace ndserve::kernels {

absl::StatusOr<const TrainKernels*> LookupTrainKernels(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return &cpu::TrainKernelTable();
    case DeviceKind::kCuda:
#ifdef NDSERVE_WITH_CUDA
      return &gpu::TrainKernelTable();
#else
      return absl::FailedPreconditionError("this build has no CUDA backend: no CUDA training math");
#endif
    case DeviceKind::kCudaHost:
      break;
  }
  return absl::UnimplementedError(
      absl::StrCat("no training math for device kind ", static_cast<int>(kind)));
}

}  // namespace ndserve::kernels
