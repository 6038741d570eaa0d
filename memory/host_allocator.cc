#include "memory/host_allocator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ndserve {
namespace {

std::size_t RoundUp(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

}  // namespace

std::uint64_t HostAllocator::PhysicalBytes() {
  return static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

std::uint64_t HostAllocator::AvailableBytes() {
  return static_cast<std::uint64_t>(sysconf(_SC_AVPHYS_PAGES)) *
         static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

HostAllocator::HostAllocator(std::optional<std::uint64_t> capacity, Device device)
    : DeviceAllocator(device), capacity_(capacity) {}

std::uint64_t HostAllocator::TotalBytes() const { return capacity_.value_or(PhysicalBytes()); }

std::uint64_t HostAllocator::FreeBytes() const {
  if (capacity_) {
    std::uint64_t used = in_use();
    return used >= *capacity_ ? 0 : *capacity_ - used;
  }
  return AvailableBytes();
}

absl::StatusOr<void*> HostAllocator::DoAllocate(std::size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("HostAllocator: zero-byte allocation");
  if (bytes > (std::size_t{1} << 48)) {
    // Keeps the capacity sum and the 256-byte round-up below from overflowing.
    return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", bytes,
                                                     " bytes is larger than any machine"));
  }
  if (capacity_) {
    // Reserve first so concurrent callers cannot both squeeze into the last bytes.
    std::uint64_t prev = in_use_.fetch_add(bytes, std::memory_order_relaxed);
    if (prev + bytes > *capacity_) {
      in_use_.fetch_sub(bytes, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(absl::StrCat(
          "host device full: ", bytes, " bytes requested, ", *capacity_ - std::min(prev, *capacity_),
          " free of ", *capacity_));
    }
  } else {
    in_use_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void* p = std::aligned_alloc(kAlignment, RoundUp(bytes, kAlignment));
  if (p == nullptr) {
    in_use_.fetch_sub(bytes, std::memory_order_relaxed);
    return absl::ResourceExhaustedError(
        absl::StrCat("host allocation of ", bytes, " bytes failed"));
  }
  return p;
}

void HostAllocator::DoDeallocate(void* ptr, std::size_t bytes) {
  std::free(ptr);
  in_use_.fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace ndserve
