#ifndef NDSERVE_MEMORY_DEVICE_H_
#define NDSERVE_MEMORY_DEVICE_H_

#include <compare>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ndserve {

// kCudaHost is page-locked host memory that CUDA device `ordinal` copies from and to
// without staging (cudaHostAlloc): host-addressable like kCpu, with its own pool so that
// its bytes are counted apart (docs/design.md §4.3). Kernels never run on it.
enum class DeviceKind { kCpu, kCuda, kCudaHost };

// Names one place memory can live. A plain value: copy freely.
struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = 0;

  static Device Cpu() { return Device{DeviceKind::kCpu, 0}; }
  static Device Cuda(int ordinal) { return Device{DeviceKind::kCuda, ordinal}; }
  static Device CudaHost(int ordinal) { return Device{DeviceKind::kCudaHost, ordinal}; }

  // Memory only a CUDA device can address (kernels and copies go through CUDA).
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  // Page-locked host memory for CUDA device `ordinal`; the host reads and writes it.
  bool is_cuda_host() const { return kind == DeviceKind::kCudaHost; }
  // "cpu:0", "cuda:1", "cuda_host:0": the spelling used in logs, metrics labels and the
  // admin API.
  std::string ToString() const;

  friend auto operator<=>(const Device&, const Device&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Device& d) {
    return H::combine(std::move(h), d.kind, d.ordinal);
  }
};

// Parses "cpu", "cpu:0", "cuda", "cuda:1", "gpu:0" (where a model can run; the pinned
// host kind is not one, so it is not accepted).
absl::StatusOr<Device> ParseDevice(absl::string_view text);

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_DEVICE_H_
