#ifndef NDSERVE_ENGINE_PINNED_STAGING_H_
#define NDSERVE_ENGINE_PINNED_STAGING_H_

#include <cstddef>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "memory/block.h"
#include "memory/pool.h"

namespace ndserve::engine {

// The page-locked host blocks one GPU run copies through (docs/design.md §4.3): a request's
// input bytes are copied into one, and the device reads it by DMA on the predictor's
// stream; outputs come back into others, and the reply is copied out of them after the
// run's one synchronization. Blocks come from the pinned pool of the predictor's GPU
// (`DevicePools::Get(Device::CudaHost(n))`), so a warm run allocates nothing from the
// driver.
//
// Ownership: owns the blocks it took until Release or destruction, which hand them back
// to the pool; the caller must have synchronized the stream that reads or writes them
// first. Borrows the pool. Not thread-safe: one run.
class PinnedStaging {
 public:
  explicit PinnedStaging(Pool* pool) : pool_(pool) {}
  ~PinnedStaging() { Release(); }
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // A block of `bytes` (RESOURCE_EXHAUSTED past the pinned pool's limit). Zero bytes is
  // a null pointer, which the copies accept.
  absl::StatusOr<void*> Take(std::size_t bytes);
  // Returns every block to the pool.
  void Release();

 private:
  Pool* const pool_;
  absl::InlinedVector<Block, 4> blocks_;
};

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_PINNED_STAGING_H_
