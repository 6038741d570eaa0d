// NDManager's read-only side: counts, the tree dump and the per-level sums that the
// metrics exporter and the admin RPC read.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "memory/nd_manager.h"

namespace ndserve {

std::shared_ptr<NDManager> NDManager::parent() const {
  if (parent_ == nullptr) return nullptr;
  // While this manager is open its parent is alive (see parent_); our lock keeps a
  // closing parent from finishing our Close meanwhile.
  SpinLockHolder lock(&mu_);
  if (closed_) return nullptr;
  return parent_->weak_from_this().lock();
}

std::int64_t NDManager::resource_count() const {
  SpinLockHolder lock(&mu_);
  return resource_count_;
}

std::uint64_t NDManager::bytes() const {
  SpinLockHolder lock(&mu_);
  return bytes_;
}

bool NDManager::Holds(const NDArray& array) const {
  return array.state_ != nullptr && array.state_->owner.load(std::memory_order_acquire) == this;
}

ManagerNodeInfo NDManager::DebugInfo(bool with_blocks) const {
  ManagerNodeInfo info;
  {
    SpinLockHolder lock(&mu_);
    info.capped = capped_;
    info.closed = closed_;
    info.resource_count = resource_count_;
    info.bytes = bytes_;
    // The rounded sizes are not kept as a running sum: that would cost Create a second
    // add on the hot path for a number only admin reads and scrapes ask for.
    if (with_blocks) info.blocks.reserve(static_cast<std::size_t>(resource_count_));
    for (const internal::ArrayState* s = resources_; s != nullptr; s = s->next) {
      info.block_bytes += s->block.size;
      if (with_blocks && !s->block.empty()) {
        info.blocks.push_back(HeldBlock{reinterpret_cast<std::uintptr_t>(s->block.ptr),
                                        s->block.size, s->block.requested, s->name});
      }
    }
  }
  const std::vector<std::shared_ptr<NDManager>> children = ChildrenSnapshot();
  info.name = name();
  info.uid = uid_;
  info.level = level_;
  info.device = device_;
  info.children.reserve(children.size());
  for (const auto& child : children) info.children.push_back(child->DebugInfo(with_blocks));
  return info;
}

namespace {

void AppendNode(const ManagerNodeInfo& node, int depth, std::string* out) {
  absl::StrAppend(out, std::string(2 * depth, ' '), node.name, " (uid=", node.uid,
                  " level=", ManagerLevelName(node.level), " device=", node.device.ToString(),
                  node.capped ? " capped" : "", node.closed ? " closed" : "",
                  ") resources=", node.resource_count, " bytes=", node.bytes, "\n");
  for (const ManagerNodeInfo& child : node.children) AppendNode(child, depth + 1, out);
}

}  // namespace

std::string NDManager::DebugDump() const {
  std::string out;
  AppendNode(DebugInfo(), 0, &out);
  return out;
}

void NDManager::AccumulateLevels(ManagerLevelSnapshot* snapshot) const {
  {
    SpinLockHolder lock(&mu_);
    ManagerLevelCounts& counts = (*snapshot)[level_];
    if (closed_) return;  // closing: no longer live, holds nothing
    ++counts.live_managers;
    counts.attached_resources += resource_count_;
    counts.attached_bytes += static_cast<std::int64_t>(bytes_);
  }
  const std::vector<std::shared_ptr<NDManager>> children = ChildrenSnapshot();
  for (const auto& child : children) child->AccumulateLevels(snapshot);
}

}  // namespace ndserve
