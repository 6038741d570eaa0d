#include "server/admin_service.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "memory/device_pools.h"
#include "memory/manager_levels.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "memory/pool.h"
#include "memory/memory_snapshot.h"
#include "server/memory_snapshot_proto.h"
#include "server/status_util.h"

namespace ndserve {
namespace {

// Copies `info` into `node` and appends its line to `text`; `depth` counts levels below
// the system manager, `max_depth` 0 means no limit.
void AppendManager(const ManagerNodeInfo& info, absl::string_view parent_session, int depth,
                   int max_depth, admin::v1::ManagerNode* node, std::string* text) {
  const std::string session = TrainingSessionOf(info, parent_session);
  ManagerFieldsToProto(info, session, node);
  absl::StrAppend(text, std::string(2 * depth, ' '), info.name, " (uid=", info.uid,
                  " level=", ManagerLevelName(info.level), " device=", info.device.ToString(),
                  session.empty() ? "" : " session=", session, info.capped ? " capped" : "",
                  info.closed ? " closed" : "", ") resources=", info.resource_count,
                  " bytes=", info.bytes, "\n");
  if (max_depth > 0 && depth >= max_depth) {
    if (!info.children.empty()) {
      absl::StrAppend(text, std::string(2 * depth + 2, ' '), "(", info.children.size(),
                      " sub-managers not shown)\n");
    }
    return;
  }
  for (const ManagerNodeInfo& child : info.children) {
    AppendManager(child, session, depth + 1, max_depth, node->add_children(), text);
  }
}

}  // namespace

AdminServiceImpl::AdminServiceImpl(MemorySystem* memory, AdminAuth auth,
                                   ModelMemorySource models)
    : memory_(memory), auth_(std::move(auth)), models_(std::move(models)) {}

absl::StatusOr<std::vector<Pool*>> AdminServiceImpl::SelectPools(const DevicePools& pools,
                                                                 const DeviceFilter& filter) {
  std::vector<Pool*> selected = pools.All();
  selected.erase(std::remove_if(selected.begin(), selected.end(),
                                [&filter](const Pool* p) { return !filter.Matches(p->device()); }),
                 selected.end());
  if (selected.empty()) {
    return absl::NotFoundError(absl::StrCat("no memory pool on ", filter.Describe(),
                                            " (a pool exists once something allocated there)"));
  }
  return selected;
}

void AdminServiceImpl::FillPoolStatus(const Pool& pool, bool include_outstanding,
                                      admin::v1::PoolStatus* out) {
  PoolStatsToProto(pool.device(), pool.name(), pool.Stats(), out);
  if (include_outstanding) {
    for (const OutstandingAllocation& a : pool.Outstanding()) {
      admin::v1::OutstandingAllocation* o = out->add_outstanding();
      o->set_address(a.address);
      o->set_bytes(a.bytes);
      o->set_manager(a.owner);
      o->set_stack_trace(a.stack_trace);
    }
  }
}

grpc::Status AdminServiceImpl::GetMemoryStatus(grpc::ServerContext* context,
                                               const admin::v1::GetMemoryStatusRequest* request,
                                               admin::v1::MemoryStatus* response) {
  if (absl::Status s = auth_.Check(*context); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<DeviceFilter> filter = DeviceFilter::Make(request->device_id(), request->device());
  if (!filter.ok()) return ToGrpcStatus(filter.status());
  absl::StatusOr<std::vector<Pool*>> pools = SelectPools(memory_->pools(), *filter);
  if (!pools.ok()) return ToGrpcStatus(pools.status());
  std::string text;
  for (const Pool* pool : *pools) {
    FillPoolStatus(*pool, request->include_outstanding(), response->add_pools());
    absl::StrAppend(&text, pool->MemoryStatus(request->include_outstanding()));
  }
  if (models_) {
    std::vector<std::string> devices;
    for (const Pool* pool : *pools) devices.push_back(pool->device().ToString());
    for (const ModelMemorySample& m : models_()) {
      if (std::find(devices.begin(), devices.end(), m.device) == devices.end()) continue;
      admin::v1::ModelMemory* out = response->add_models();
      out->set_model(m.model);
      out->set_version(m.version);
      out->set_device(m.device);
      out->set_kind(m.kind);
      out->set_bytes(m.bytes);
      absl::StrAppend(&text, "Model '", m.model, "' version ", m.version, " on ", m.device, ": ",
                      FormatBytes(m.bytes), " ", m.kind, "\n");
    }
  }
  response->set_text(std::move(text));
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::Reclaim(grpc::ServerContext* context,
                                       const admin::v1::ReclaimRequest* request,
                                       admin::v1::ReclaimResponse* response) {
  if (absl::Status s = auth_.Check(*context); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<DeviceFilter> filter = DeviceFilter::Make(request->device_id(), request->device());
  if (!filter.ok()) return ToGrpcStatus(filter.status());
  absl::StatusOr<std::vector<Pool*>> pools = SelectPools(memory_->pools(), *filter);
  if (!pools.ok()) return ToGrpcStatus(pools.status());
  const std::uint64_t target = request->target_bytes();
  std::uint64_t total = 0;
  for (Pool* pool : *pools) {
    // The target is shared: once it is met, the remaining pools keep their caches.
    if (target != 0 && total >= target) break;
    const std::uint64_t released =
        pool->Reclaim(target == 0 ? 0 : target - total, ReclaimReason::kAdmin);
    total += released;
    LOG(INFO) << "admin reclaim on " << pool->device().ToString() << ": released "
              << FormatBytes(released) << " (target "
              << (target == 0 ? std::string("all cached") : FormatBytes(target)) << "), "
              << FormatBytes(pool->Stats().cached_bytes) << " still cached";
  }
  response->set_reclaimed_bytes(total);
  for (const Pool* pool : *pools) {
    FillPoolStatus(*pool, /*include_outstanding=*/false, response->add_pools());
  }
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::DebugDump(grpc::ServerContext* context,
                                         const admin::v1::DebugDumpRequest* request,
                                         admin::v1::DebugDumpResponse* response) {
  if (absl::Status s = auth_.Check(*context); !s.ok()) return ToGrpcStatus(s);
  if (request->max_depth() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "max_depth must not be negative");
  }
  // One reading of the tree feeds both the message and the text, so they agree.
  const std::vector<ManagerNodeInfo> systems = memory_->DebugInfoAll();
  admin::v1::ManagerNode* root = response->mutable_root();
  root->set_name("process");
  root->set_uid("0");
  std::string text;
  for (const ManagerNodeInfo& system : systems) {
    AppendManager(system, "", 0, request->max_depth(), root->add_children(), &text);
  }
  response->set_text(std::move(text));
  return grpc::Status::OK;
}

grpc::Status AdminServiceImpl::GetMemorySnapshot(
    grpc::ServerContext* context, const admin::v1::GetMemorySnapshotRequest* request,
    admin::v1::MemorySnapshot* response) {
  if (absl::Status s = auth_.Check(*context); !s.ok()) return ToGrpcStatus(s);
  // NOT_FOUND by the other calls' rule when no pool matches.
  absl::StatusOr<DeviceFilter> filter = DeviceFilter::Make(request->device_id(), request->device());
  if (!filter.ok()) return ToGrpcStatus(filter.status());
  absl::StatusOr<std::vector<Pool*>> pools = SelectPools(memory_->pools(), *filter);
  if (!pools.ok()) return ToGrpcStatus(pools.status());
  MemorySnapshotToProto(TakeMemorySnapshot(*memory_), *filter, response);
  return grpc::Status::OK;
}

}  // namespace ndserve
