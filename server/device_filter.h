#ifndef NDSERVE_SERVER_DEVICE_FILTER_H_
#define NDSERVE_SERVER_DEVICE_FILTER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "memory/device.h"

namespace ndserve {

// Which devices an admin call looks at. A request names either a device label
// ("cpu:0", "cuda:1", "cuda_host:0": exactly that device) or an ordinal (-1 every
// device; N every device of ordinal N, which for N = 0 includes cpu:0 and the pinned
// staging memory cuda_host:0). The label wins when both are given, so that an operator
// can tell a GPU's pool from its pinned staging pool.
class DeviceFilter {
 public:
  // INVALID_ARGUMENT for an ordinal below -1 or a label that is not a device.
  static absl::StatusOr<DeviceFilter> Make(int device_id, absl::string_view device);
  static DeviceFilter All() { return DeviceFilter(-1, std::nullopt); }

  bool Matches(const Device& device) const;
  // For NOT_FOUND messages: "device cuda:1", "device ordinal 3" or "any device".
  std::string Describe() const;

 private:
  DeviceFilter(int device_id, std::optional<Device> device)
      : device_id_(device_id), device_(device) {}

  int device_id_;
  std::optional<Device> device_;
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_DEVICE_FILTER_H_
