#include "memory/device.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ndserve {

std::string Device::ToString() const {
  switch (kind) {
    case DeviceKind::kCpu:
      return absl::StrCat("cpu:", ordinal);
    case DeviceKind::kCuda:
      return absl::StrCat("cuda:", ordinal);
    case DeviceKind::kCudaHost:
      return absl::StrCat("cuda_host:", ordinal);
  }
  return absl::StrCat("device:", ordinal);
}

absl::StatusOr<Device> ParseDevice(absl::string_view text) {
  std::string lower = absl::AsciiStrToLower(text);
  absl::string_view name = lower;
  int ordinal = 0;
  if (auto colon = name.find(':'); colon != absl::string_view::npos) {
    if (!absl::SimpleAtoi(name.substr(colon + 1), &ordinal) || ordinal < 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad device ordinal in '", text, "'"));
    }
    name = name.substr(0, colon);
  }
  if (name == "cpu") return Device{DeviceKind::kCpu, ordinal};
  if (name == "cuda" || name == "gpu") return Device{DeviceKind::kCuda, ordinal};
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device '", text, "' (expected cpu, cpu:N, cuda or cuda:N)"));
}

}  // namespace ndserve
