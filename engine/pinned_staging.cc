#include "engine/pinned_staging.h"

#include "base/status_macros.h"

namespace ndserve::engine {

absl::StatusOr<void*> PinnedStaging::Take(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  NDS_ASSIGN_OR_RETURN(Block block, pool_->Allocate(bytes, "staging"));
  blocks_.push_back(block);
  return block.ptr;
}

void PinnedStaging::Release() {
  if (blocks_.empty()) return;
  pool_->FreeAll(blocks_);
  blocks_.clear();
}

}  // namespace ndserve::engine
