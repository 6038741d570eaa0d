#include "memory/memory_snapshot.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "memory/memory_system.h"
#include "memory/pool.h"

namespace ndserve {
namespace {

struct Owner {
  const HeldBlock* block;
  std::string path;
  std::uint64_t uid;
  std::string model;
};

using OwnerIndex = absl::flat_hash_map<std::pair<Device, std::uintptr_t>, Owner>;

void IndexOwners(const ManagerNodeInfo& node, const std::string& parent_path,
                 const std::string& model, OwnerIndex* index) {
  const std::string path =
      parent_path.empty() ? node.name : absl::StrCat(parent_path, " > ", node.name);
  const std::string& owner_model = node.level == ManagerLevel::kModel ? node.name : model;
  for (const HeldBlock& b : node.blocks) {
    index->insert_or_assign(std::make_pair(node.device, b.address),
                            Owner{&b, path, node.uid, owner_model});
  }
  for (const ManagerNodeInfo& child : node.children) {
    IndexOwners(child, path, owner_model, index);
  }
}

SnapshotBlock FromLayout(const LayoutBlock& b) {
  SnapshotBlock out;
  out.offset = b.offset;
  out.bytes = b.bytes;
  out.state = b.state;
  out.stream = b.stream;
  return out;
}

void SetOwner(const Owner& owner, SnapshotBlock* block) {
  block->owner = owner.path;
  block->owner_uid = owner.uid;
  block->model = owner.model;
  block->array = owner.block->array;
  block->requested = owner.block->requested;
}

}  // namespace

MemorySnapshot JoinMemorySnapshot(std::vector<PoolLayout> layouts, std::vector<PoolStats> stats,
                                  std::vector<ManagerNodeInfo> managers) {
  MemorySnapshot snapshot;
  OwnerIndex owners;
  for (const ManagerNodeInfo& system : managers) IndexOwners(system, "", "", &owners);
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    PoolLayout& layout = layouts[i];
    PoolSnapshot pool;
    pool.device = layout.device;
    pool.pool = layout.pool;
    if (i < stats.size()) pool.stats = stats[i];
    for (const LayoutSegment& s : layout.segments) {
      SnapshotSegment segment{s.address, s.bytes, {}};
      for (const LayoutBlock& b : s.blocks) {
        SnapshotBlock block = FromLayout(b);
        if (b.state == BlockState::kAllocated) {
          auto it = owners.find(std::make_pair(layout.device, s.address + b.offset));
          if (it != owners.end()) SetOwner(it->second, &block);
        }
        segment.blocks.push_back(std::move(block));
      }
      pool.segments.push_back(std::move(segment));
    }
    if (!layout.lists_allocated) {
      // Each live block of these pools is a whole segment of its own.
      for (const auto& [key, owner] : owners) {
        if (key.first != layout.device) continue;
        SnapshotBlock block;
        block.bytes = owner.block->bytes;
        block.state = BlockState::kAllocated;
        SetOwner(owner, &block);
        pool.segments.push_back(SnapshotSegment{key.second, owner.block->bytes, {block}});
      }
      std::sort(pool.segments.begin(), pool.segments.end(),
                [](const SnapshotSegment& a, const SnapshotSegment& b) {
                  return a.address < b.address;
                });
    }
    snapshot.pools.push_back(std::move(pool));
  }
  // The owners point into `managers`; they are done with before it moves.
  owners.clear();
  snapshot.managers = std::move(managers);
  return snapshot;
}

MemorySnapshot TakeMemorySnapshot(MemorySystem& memory) {
  std::vector<ManagerNodeInfo> managers = memory.DebugInfoAll(/*with_blocks=*/true);
  std::vector<PoolLayout> layouts;
  std::vector<PoolStats> stats;
  for (Pool* pool : memory.pools().All()) {
    layouts.push_back(pool->Layout());
    stats.push_back(pool->Stats());
  }
  return JoinMemorySnapshot(std::move(layouts), std::move(stats), std::move(managers));
}

}  // namespace ndserve
