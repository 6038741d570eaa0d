#include "memory/limit_guard.h"

#include "absl/strings/str_cat.h"

namespace ndserve {

absl::Status LimitGuard::Reserve(std::uint64_t bytes) {
  std::uint64_t reserved = reserved_.load(std::memory_order_relaxed);
  do {
    // Written so that neither side can overflow, whatever `bytes` is.
    if (limit_ != kNoLimit && (bytes > limit_ || reserved > limit_ - bytes)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("pool limit of ", FormatBytes(limit_), " reached"));
    }
  } while (!reserved_.compare_exchange_weak(reserved, reserved + bytes, std::memory_order_relaxed));
  return absl::OkStatus();
}

}  // namespace ndserve
