#include "server/host_memory_budget.h"

#include <prometheus/gauge.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "memory/pool_stats.h"

namespace ndserve {

HostMemoryBudget::HostMemoryBudget(uint64_t limit_bytes, prometheus::Gauge* gauge)
    : limit_(limit_bytes), gauge_(gauge) {}

absl::Status HostMemoryBudget::Acquire(size_t bytes, absl::string_view what) {
  uint64_t current = in_use_.load(std::memory_order_relaxed);
  uint64_t next = 0;
  do {
    if (__builtin_add_overflow(current, bytes, &next) || (limit_ > 0 && next > limit_)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          what, " needs ", FormatBytes(bytes), " of host memory, but requests in flight hold ",
          FormatBytes(current), " of the ", FormatBytes(limit_),
          " allowed (--max_inflight_host_bytes); retry later"));
    }
  } while (!in_use_.compare_exchange_weak(current, next, std::memory_order_relaxed));
  if (gauge_ != nullptr) gauge_->Increment(static_cast<double>(bytes));
  return absl::OkStatus();
}

void HostMemoryBudget::Return(size_t bytes) {
  in_use_.fetch_sub(bytes, std::memory_order_relaxed);
  if (gauge_ != nullptr) gauge_->Decrement(static_cast<double>(bytes));
}

absl::StatusOr<HostMemoryBudget::Reservation> HostMemoryBudget::Reserve(size_t bytes,
                                                                        absl::string_view what) {
  Reservation reservation(this);
  if (absl::Status s = reservation.Grow(bytes, what); !s.ok()) return s;
  return reservation;
}

HostMemoryBudget::Reservation::Reservation(Reservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

HostMemoryBudget::Reservation& HostMemoryBudget::Reservation::operator=(
    Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

HostMemoryBudget::Reservation::~Reservation() { Release(); }

absl::Status HostMemoryBudget::Reservation::Grow(size_t bytes, absl::string_view what) {
  if (budget_ == nullptr || bytes == 0) return absl::OkStatus();
  if (absl::Status s = budget_->Acquire(bytes, what); !s.ok()) return s;
  bytes_ += bytes;
  return absl::OkStatus();
}

void HostMemoryBudget::Reservation::ShrinkTo(size_t bytes) {
  if (budget_ == nullptr || bytes >= bytes_) return;
  budget_->Return(bytes_ - bytes);
  bytes_ = bytes;
}

void HostMemoryBudget::Reservation::Release() {
  if (budget_ != nullptr && bytes_ > 0) budget_->Return(bytes_);
  bytes_ = 0;
}

}  // namespace ndserve
