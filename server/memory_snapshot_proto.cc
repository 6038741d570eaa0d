#include "server/memory_snapshot_proto.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/training_scopes.h"
#include "memory/manager_levels.h"

namespace ndserve {

std::string TrainingSessionOf(const ManagerNodeInfo& info, absl::string_view parent_session) {
  if (info.level == ManagerLevel::kTrainer) {
    return engine::TrainerScopeSession(info.name).value_or(std::string(parent_session));
  }
  return std::string(parent_session);
}

void ManagerFieldsToProto(const ManagerNodeInfo& info, absl::string_view session,
                          admin::v1::ManagerNode* node) {
  node->set_level(std::string(ManagerLevelName(info.level)));
  node->set_training_session(std::string(session));
  node->set_name(info.name);
  node->set_uid(absl::StrCat(info.uid));
  node->set_device(info.device.ToString());
  node->set_capped(info.capped);
  node->set_resource_count(
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, info.resource_count)));
  node->set_bytes(info.bytes);
  node->set_block_bytes(info.block_bytes);
}

namespace {

void ManagerToProto(const ManagerNodeInfo& info, absl::string_view parent_session,
                    admin::v1::ManagerNode* node) {
  const std::string session = TrainingSessionOf(info, parent_session);
  ManagerFieldsToProto(info, session, node);
  for (const ManagerNodeInfo& child : info.children) {
    ManagerToProto(child, session, node->add_children());
  }
}

}  // namespace

void PoolStatsToProto(const Device& device, absl::string_view pool, const PoolStats& s,
                      admin::v1::PoolStatus* out) {
  out->set_device(device.ToString());
  out->set_pool(std::string(pool));
  out->set_allocated_bytes(s.allocated_bytes);
  out->set_cached_bytes(s.cached_bytes);
  out->set_reserved_bytes(s.reserved_bytes);
  out->set_limit_bytes(s.limit_bytes == kNoLimit ? 0 : s.limit_bytes);
  out->set_peak_allocated_bytes(s.peak_allocated_bytes);
  out->set_device_total_bytes(s.device_total_bytes);
  out->set_device_free_bytes(s.device_free_bytes);
  out->set_alloc_count(s.alloc_count);
  out->set_cache_hits(s.cache_hits);
  out->set_cache_misses(s.cache_misses);
  out->set_reclaimed_bytes_total(s.reclaimed_bytes_total());
  out->set_oom_count(s.oom_count);
  out->set_outstanding_allocations(s.outstanding_allocations);
  out->set_inactive_split_bytes(s.inactive_split_bytes);
}

void MemorySnapshotToProto(const MemorySnapshot& snapshot, const DeviceFilter& filter,
                           admin::v1::MemorySnapshot* out) {
  for (const PoolSnapshot& pool : snapshot.pools) {
    if (!filter.Matches(pool.device)) continue;
    admin::v1::PoolSnapshot* p = out->add_pools();
    PoolStatsToProto(pool.device, pool.pool, pool.stats, p->mutable_status());
    for (const SnapshotSegment& segment : pool.segments) {
      admin::v1::SnapshotSegment* s = p->add_segments();
      s->set_address(segment.address);
      s->set_bytes(segment.bytes);
      for (const SnapshotBlock& block : segment.blocks) {
        admin::v1::SnapshotBlock* b = s->add_blocks();
        b->set_offset(block.offset);
        b->set_bytes(block.bytes);
        b->set_state(std::string(BlockStateName(block.state)));
        b->set_stream(block.stream);
        if (block.owner.empty()) continue;
        b->set_owner(block.owner);
        b->set_owner_uid(absl::StrCat(block.owner_uid));
        b->set_model(block.model);
        b->set_array(block.array);
        b->set_requested_bytes(block.requested);
      }
    }
  }
  admin::v1::ManagerNode* root = out->mutable_root();
  root->set_name("process");
  root->set_uid("0");
  for (const ManagerNodeInfo& system : snapshot.managers) {
    if (!filter.Matches(system.device)) continue;
    ManagerToProto(system, "", root->add_children());
  }
}

}  // namespace ndserve
