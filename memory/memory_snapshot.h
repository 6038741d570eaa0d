#ifndef NDSERVE_MEMORY_MEMORY_SNAPSHOT_H_
#define NDSERVE_MEMORY_MEMORY_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "memory/device.h"
#include "memory/nd_manager.h"
#include "memory/pool_layout.h"
#include "memory/pool_stats.h"

namespace ndserve {

class MemorySystem;

// One block of the memory map: where it is, what state, and who holds it.
struct SnapshotBlock {
  std::uint64_t offset = 0;  // from its segment's base
  std::uint64_t bytes = 0;
  BlockState state = BlockState::kAllocated;
  int stream = 0;
  // Allocated blocks whose array a manager holds: the manager names from the system
  // manager down, joined by " > ", its uid, the nearest model-level manager's name
  // (what the page colours by; empty outside any model) and the array's name. All empty
  // for free blocks and for live ones no manager holds (allocated on the pool directly,
  // or moving between scopes while the snapshot was taken).
  std::string owner;
  std::uint64_t owner_uid = 0;
  std::string model;
  std::string array;
  std::uint64_t requested = 0;
};

struct SnapshotSegment {
  std::uintptr_t address = 0;
  std::uint64_t bytes = 0;
  std::vector<SnapshotBlock> blocks;  // in address order, tiling the segment
};

struct PoolSnapshot {
  Device device;
  std::string pool;
  PoolStats stats;
  std::vector<SnapshotSegment> segments;  // by address
};

// Every pool's segments and blocks joined to the NDManager trees by address
// (docs/design.md §3, "Memory map"): what the admin GetMemorySnapshot RPC and the /memory
// page show.
struct MemorySnapshot {
  std::vector<PoolSnapshot> pools;
  // The manager trees, one per device (DebugInfo with blocks): the page's icicle.
  std::vector<ManagerNodeInfo> managers;
};

// Reads `memory`'s manager trees, then each pool's layout and stats. Each pool's layout
// is one consistent reading; the join with the trees is exact while no request runs
// (a block allocated or freed in between shows without an owner, or twice).
MemorySnapshot TakeMemorySnapshot(MemorySystem& memory);

// The join itself, for pools and trees read by the caller: pools whose layout does not
// list live blocks get one segment per held block on their device.
MemorySnapshot JoinMemorySnapshot(std::vector<PoolLayout> layouts, std::vector<PoolStats> stats,
                                  std::vector<ManagerNodeInfo> managers);

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_MEMORY_SNAPSHOT_H_
