#ifndef NDSERVE_SERVER_HOST_MEMORY_BUDGET_H_
#define NDSERVE_SERVER_HOST_MEMORY_BUDGET_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/prometheus_fwd.h"

namespace ndserve {

// The host memory that inference requests and responses hold outside the memory pools:
// the wire request gRPC parsed, typed contents the decoder copied, and the response
// message being built (docs/design.md §3, §5). The pools bound tensor memory; this
// bounds the rest, so that many large requests at once meet RESOURCE_EXHAUSTED instead
// of growing the process without limit. It counts what handlers declare; it does not
// hook the allocator.
//
// `limit_bytes` 0 means no limit (the bytes are still counted). The gauge (borrowed,
// nullable; it must outlive the budget) follows the bytes held. Thread-safe; a
// Reservation belongs to one thread at a time.
class HostMemoryBudget {
 public:
  // Bytes held for one request until it is destroyed. Move-only.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation();

    // Holds `bytes` more; RESOURCE_EXHAUSTED naming `what` (and holding nothing more)
    // when that would pass the limit.
    absl::Status Grow(size_t bytes, absl::string_view what);
    // Holds only `bytes` (a no-op when it holds no more): what a request holds once its
    // reply is encoded and the messages it came from are freed.
    void ShrinkTo(size_t bytes);
    size_t bytes() const { return bytes_; }

   private:
    friend class HostMemoryBudget;
    explicit Reservation(HostMemoryBudget* budget) : budget_(budget) {}
    void Release();

    HostMemoryBudget* budget_ = nullptr;
    size_t bytes_ = 0;
  };

  HostMemoryBudget(uint64_t limit_bytes, prometheus::Gauge* gauge);
  HostMemoryBudget(const HostMemoryBudget&) = delete;
  HostMemoryBudget& operator=(const HostMemoryBudget&) = delete;

  // A reservation of `bytes`, or RESOURCE_EXHAUSTED naming `what` when they do not fit.
  absl::StatusOr<Reservation> Reserve(size_t bytes, absl::string_view what);

  uint64_t in_use() const { return in_use_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  absl::Status Acquire(size_t bytes, absl::string_view what);
  void Return(size_t bytes);

  const uint64_t limit_;
  prometheus::Gauge* const gauge_;
  std::atomic<uint64_t> in_use_{0};
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_HOST_MEMORY_BUDGET_H_
