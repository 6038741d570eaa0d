#ifndef NDSERVE_MEMORY_POOL_LAYOUT_H_
#define NDSERVE_MEMORY_POOL_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "memory/device.h"

namespace ndserve {

// What a piece of a pool's segment is doing (docs/design.md §3, "Memory map").
enum class BlockState {
  kAllocated,      // handed out, live
  kCached,         // free, in a segment with no live block: Reclaim can give it back
  kInactiveSplit,  // free, in a segment that also holds a live block (fragmentation)
};

// "allocated", "cached", "inactive_split": the admin API's and the page's spelling.
absl::string_view BlockStateName(BlockState state);

struct LayoutBlock {
  std::uint64_t offset = 0;  // from the segment's base
  std::uint64_t bytes = 0;
  BlockState state = BlockState::kAllocated;
  // Pools are not stream-ordered (Pool's contract): every block is on stream 0, the
  // device's; the field is there so that a stream-ordered pool can say otherwise.
  int stream = 0;
};

// One span the pool took from its device allocator, and the blocks that tile it.
struct LayoutSegment {
  std::uintptr_t address = 0;
  std::uint64_t bytes = 0;
  std::vector<LayoutBlock> blocks;  // in address order, without gaps
};

// Pool::Layout(): every segment the pool can see, by address.
struct PoolLayout {
  Device device;
  std::string pool;  // PoolKindName
  std::vector<LayoutSegment> segments;
  // The split pool keeps a node for every block, live ones included, so its layout is
  // complete. The binned, simple and none pools hand a live block out whole and keep
  // nothing about it (their hot paths stay free of bookkeeping): their layouts list the
  // cached segments only, and the live ones come from their owners (MemorySnapshot
  // joins the NDManager trees in).
  bool lists_allocated = false;
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_POOL_LAYOUT_H_
