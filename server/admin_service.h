#ifndef NDSERVE_SERVER_ADMIN_SERVICE_H_
#define NDSERVE_SERVER_ADMIN_SERVICE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "proto/admin.grpc.pb.h"
#include "server/admin_auth.h"
#include "server/device_filter.h"
#include "server/model_memory_source.h"

namespace ndserve {

class DevicePools;
class MemorySystem;
class Pool;

// ndserve.admin.v1.MemoryAdmin (docs/design.md §5): pool status, reclaim of cached memory
// and the NDManager tree. Every call first passes the AdminAuth token rule. Handlers
// are thin: select pools, call memory/, copy counters into the reply.
//
// A synchronous service: admin calls are rare, and a reclaim may block on the device
// (cudaFree), which must not stall the inference completion queues. Reads and reclaims
// the pools of `memory` and dumps its manager trees (borrowed; it must outlive the
// service). Thread-safe.
class AdminServiceImpl final : public ndserve::admin::v1::MemoryAdmin::Service {
 public:
  // `models` (optional) adds per-model memory to GetMemoryStatus.
  AdminServiceImpl(MemorySystem* memory, AdminAuth auth, ModelMemorySource models = {});

  grpc::Status GetMemoryStatus(grpc::ServerContext* context,
                               const ndserve::admin::v1::GetMemoryStatusRequest* request,
                               ndserve::admin::v1::MemoryStatus* response) override;
  grpc::Status Reclaim(grpc::ServerContext* context,
                       const ndserve::admin::v1::ReclaimRequest* request,
                       ndserve::admin::v1::ReclaimResponse* response) override;
  grpc::Status DebugDump(grpc::ServerContext* context,
                         const ndserve::admin::v1::DebugDumpRequest* request,
                         ndserve::admin::v1::DebugDumpResponse* response) override;
  grpc::Status GetMemorySnapshot(grpc::ServerContext* context,
                                 const ndserve::admin::v1::GetMemorySnapshotRequest* request,
                                 ndserve::admin::v1::MemorySnapshot* response) override;

  // The pools `filter` selects; NOT_FOUND when nothing matches.
  static absl::StatusOr<std::vector<Pool*>> SelectPools(const DevicePools& pools,
                                                        const DeviceFilter& filter);
  static void FillPoolStatus(const Pool& pool, bool include_outstanding,
                             ndserve::admin::v1::PoolStatus* out);

 private:
  MemorySystem* const memory_;
  const AdminAuth auth_;
  const ModelMemorySource models_;
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_ADMIN_SERVICE_H_
