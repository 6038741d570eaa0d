#include "server/device_filter.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ndserve {
namespace {

// ParseDevice accepts only where a model can run; the admin API also names the pinned
// staging pools, whose label is "cuda_host:N".
absl::StatusOr<Device> ParsePoolDevice(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  absl::string_view rest = lower;
  if (absl::ConsumePrefix(&rest, "cuda_host")) {
    int ordinal = 0;
    if (!rest.empty() && (!absl::ConsumePrefix(&rest, ":") || !absl::SimpleAtoi(rest, &ordinal) ||
                          ordinal < 0)) {
      return absl::InvalidArgumentError(absl::StrCat("bad device ordinal in '", text, "'"));
    }
    return Device::CudaHost(ordinal);
  }
  absl::StatusOr<Device> device = ParseDevice(text);
  if (!device.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown device '", text, "' (expected cpu:N, cuda:N or cuda_host:N)"));
  }
  return device;
}

}  // namespace

absl::StatusOr<DeviceFilter> DeviceFilter::Make(int device_id, absl::string_view device) {
  if (!device.empty()) {
    absl::StatusOr<Device> parsed = ParsePoolDevice(device);
    if (!parsed.ok()) return parsed.status();
    return DeviceFilter(-1, *parsed);
  }
  if (device_id < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_id ", device_id, " is invalid (-1 selects every device)"));
  }
  return DeviceFilter(device_id, std::nullopt);
}

bool DeviceFilter::Matches(const Device& device) const {
  if (device_.has_value()) return device == *device_;
  return device_id_ < 0 || device.ordinal == device_id_;
}

std::string DeviceFilter::Describe() const {
  if (device_.has_value()) return absl::StrCat("device ", device_->ToString());
  if (device_id_ >= 0) return absl::StrCat("device ordinal ", device_id_);
  return "any device";
}

}  // namespace ndserve
