#ifndef NDSERVE_MEMORY_DEVICE_H_
#define NDSERVE_MEMORY_DEVICE_H_

#include <compare>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ndserve {

enum class DeviceKind { kCpu, kCuda };

// Names one place memory can live. A plain value: copy freely.
struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = 0;

  static Device Cpu() { return Device{DeviceKind::kCpu, 0}; }
  static Device Cuda(int ordinal) { return Device{DeviceKind::kCuda, ordinal}; }

  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  // "cpu:0", "cuda:1": the spelling used in logs, metrics labels and the admin API.
  std::string ToString() const;

  friend auto operator<=>(const Device&, const Device&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Device& d) {
    return H::combine(std::move(h), d.kind, d.ordinal);
  }
};

// Parses "cpu", "cpu:0", "cuda", "cuda:1", "gpu:0".
absl::StatusOr<Device> ParseDevice(absl::string_view text);

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_DEVICE_H_
