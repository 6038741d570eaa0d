// NDManager's read-only side: counts, the tree dump and the per-level sums that the
// metrics exporter and the admin RPC read.
#include <algorithm>
#include <functional>
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

void NDManager::InlineHeldLocked(std::int64_t* count, std::uint64_t* bytes,
                                 std::uint64_t* block_bytes,
                                 std::vector<HeldBlock>* blocks) const {
  if (inline_states_ == nullptr) return;
  for (const internal::ArrayState* s = inline_states_->states; s != OfferedInlineEnd(); ++s) {
    if (!InlineHeldLocked(s)) continue;
    ++*count;
    *bytes += s->nbytes;
    *block_bytes += s->block.size;
    if (blocks != nullptr && !s->block.empty()) {
      blocks->push_back(HeldBlock{reinterpret_cast<std::uintptr_t>(s->block.ptr), s->block.size,
                                  s->block.requested, s->name});
    }
  }
}

std::int64_t NDManager::resource_count() const {
  SpinLockHolder lock(&mu_);
  std::int64_t count = resource_count_;
  std::uint64_t bytes = 0, block_bytes = 0;
  InlineHeldLocked(&count, &bytes, &block_bytes, nullptr);
  return count;
}

std::uint64_t NDManager::bytes() const {
  SpinLockHolder lock(&mu_);
  std::int64_t count = 0;
  std::uint64_t bytes = bytes_, block_bytes = 0;
  InlineHeldLocked(&count, &bytes, &block_bytes, nullptr);
  return bytes;
}

bool NDManager::Holds(const NDArray& array) const {
  return array.state_ != nullptr && array.state_->owner.load(std::memory_order_acquire) == this;
}

bool NDManager::IsInlineState(const NDArray& array) const {
  if (inline_states_ == nullptr || array.state_ == nullptr) return false;
  const internal::ArrayState* begin = inline_states_->states;
  return std::less_equal<>()(begin, array.state_) &&
         std::less<>()(array.state_, begin + internal::InlineStates::kCount);
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
    if (with_blocks) {
      info.blocks.reserve(static_cast<std::size_t>(resource_count_) +
                          internal::InlineStates::kCount);
    }
    InlineHeldLocked(&info.resource_count, &info.bytes, &info.block_bytes,
                     with_blocks ? &info.blocks : nullptr);
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
    std::int64_t count = resource_count_;
    std::uint64_t bytes = bytes_, block_bytes = 0;
    InlineHeldLocked(&count, &bytes, &block_bytes, nullptr);
    ++counts.live_managers;
    counts.attached_resources += count;
    counts.attached_bytes += static_cast<std::int64_t>(bytes);
  }
  const std::vector<std::shared_ptr<NDManager>> children = ChildrenSnapshot();
  for (const auto& child : children) child->AccumulateLevels(snapshot);
}

}  // namespace ndserve
