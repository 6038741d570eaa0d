#ifndef NDSERVE_SERVER_MEMORY_SNAPSHOT_PROTO_H_
#define NDSERVE_SERVER_MEMORY_SNAPSHOT_PROTO_H_

#include <string>

#include "absl/strings/string_view.h"
#include "memory/memory_snapshot.h"
#include "memory/pool_stats.h"
#include "proto/admin.pb.h"
#include "server/device_filter.h"

namespace ndserve {

// The admin GetMemorySnapshot reply for `snapshot`: the pools and manager trees on the
// devices `filter` selects, the trees under a root named "process", as DebugDump's.
void MemorySnapshotToProto(const MemorySnapshot& snapshot, const DeviceFilter& filter,
                           ndserve::admin::v1::MemorySnapshot* out);

// The training session whose manager `info` is: its own for a trainer manager, else
// `parent_session` (a trainer's batches are the session's too; empty outside sessions).
std::string TrainingSessionOf(const ManagerNodeInfo& info, absl::string_view parent_session);

// One manager's own fields (not its children), shared by DebugDump and GetMemorySnapshot;
// `session` as TrainingSessionOf gives it.
void ManagerFieldsToProto(const ManagerNodeInfo& info, absl::string_view session,
                          ndserve::admin::v1::ManagerNode* node);

// A pool's counters as PoolStatus (shared with GetMemoryStatus).
void PoolStatsToProto(const Device& device, absl::string_view pool, const PoolStats& s,
                      ndserve::admin::v1::PoolStatus* out);

}  // namespace ndserve

#endif  // NDSERVE_SERVER_MEMORY_SNAPSHOT_PROTO_H_
