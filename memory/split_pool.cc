#include "memory/split_pool.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <limits>
#include <utility>

namespace ndserve {

SplitPool::SplitPool(std::unique_ptr<DeviceAllocator> allocator, PoolOptions options)
    : Pool(PoolKind::kSplit, std::move(allocator), options) {}

SplitPool::~SplitPool() {
  ReleaseAllCached();
  SpinLockHolder lock(&mu_);
  // What is left holds live blocks: their device memory leaks (Pool::~Pool says so),
  // but the host-side bookkeeping must not.
  while (segments_ != nullptr) {
    SegmentNode* segment = segments_;
    segments_ = segment->next;
    for (BlockNode* node = segment->first; node != nullptr;) {
      BlockNode* next = node->next;
      delete node;
      node = next;
    }
    delete segment;
  }
  while (spare_nodes_ != nullptr) {
    BlockNode* next = spare_nodes_->next;
    delete spare_nodes_;
    spare_nodes_ = next;
  }
}

SplitPool::SizeClass SplitPool::ClassOf(std::size_t bytes) {
  if (bytes <= kSmallMax) return kSmall;
  if (bytes <= kLargeMax) return kLarge;
  return kHuge;
}

std::size_t SplitPool::RoundedSize(std::size_t bytes) {
  switch (ClassOf(bytes)) {
    case kSmall:
      return RoundUp(std::max<std::size_t>(bytes, 1), kSmallRound);
    case kLarge:
      return RoundUp(bytes, kLargeRound);
    default:
      // A request this close to SIZE_MAX cannot be served anyway; saturating keeps the
      // lookup and the limit check from seeing a wrapped-around small size.
      if (bytes > std::numeric_limits<std::size_t>::max() - (kHugeRound - 1)) {
        return std::numeric_limits<std::size_t>::max();
      }
      return RoundUp(bytes, kHugeRound);
  }
}

bool SplitPool::CanSplit(SizeClass size_class, std::size_t rest) {
  switch (size_class) {
    case kSmall:
      return rest >= kSmallRound;
    case kLarge:
      // A rest of 1 MiB or less would be a small-class size stranded in a large
      // segment, where no small request ever looks; the caller keeps it instead.
      return rest > kSmallMax;
    default:
      return false;
  }
}

std::size_t SplitPool::DoSegmentSize(std::size_t bytes) const {
  switch (ClassOf(bytes)) {
    case kSmall:
      return kSmallSegment;
    case kLarge:
      return std::max(RoundedSize(bytes), kLargeSegment);
    default:
      return RoundedSize(bytes);
  }
}

std::size_t SplitPool::DoMinSegmentSize(std::size_t bytes) const { return RoundedSize(bytes); }

Block SplitPool::DoTakeCached(std::size_t bytes) {
  const SizeClass size_class = ClassOf(bytes);
  const std::size_t rounded = RoundedSize(bytes);
  FreeIndex& index = free_[size_class];
  auto it = index.lower_bound(BySizeThenAddress::Key{rounded, nullptr});
  if (it == index.end()) return Block{};
  BlockNode* node = *it;
  // The best fit is the smallest candidate, so if it is too big, all of them are.
  if (size_class == kHuge && node->size - rounded > rounded / kHugeSlackDivisor) {
    return Block{};
  }
  index.erase(it);
  if (node->segment->free_bytes == node->segment->bytes) idle_segments_.erase(node);
  return Carve(node, rounded, bytes);
}

Block SplitPool::DoAdoptSegment(Segment segment, std::size_t bytes) {
  auto* seg = new SegmentNode{static_cast<char*>(segment.ptr),
                              segment.bytes,
                              segment.bytes,
                              ClassOf(bytes),
                              nullptr,
                              nullptr,
                              segments_};
  if (segments_ != nullptr) segments_->prev = seg;
  segments_ = seg;
  BlockNode* node = NewBlockNode();
  *node = BlockNode{seg->base, seg->bytes, nullptr, nullptr, seg, true};
  seg->first = node;
  return Carve(node, RoundedSize(bytes), bytes);
}

Block SplitPool::Carve(BlockNode* node, std::size_t rounded, std::size_t requested) {
  SegmentNode* seg = node->segment;
  assert(node->free && node->size >= rounded);
  const bool was_idle = seg->free_bytes == seg->bytes;
  const std::size_t rest = node->size - rounded;
  if (CanSplit(seg->size_class, rest)) {
    BlockNode* tail = NewBlockNode();
    *tail = BlockNode{node->ptr + rounded, rest, node, node->next, seg, true};
    if (node->next != nullptr) node->next->prev = tail;
    node->next = tail;
    node->size = rounded;
    free_[seg->size_class].insert(tail);
  }
  node->free = false;
  seg->free_bytes -= node->size;
  // An idle segment's free bytes counted as reclaimable, not as fragmentation; now
  // that it holds a live block, all of its remaining free bytes are.
  if (was_idle) {
    inactive_split_bytes_ += seg->free_bytes;
  } else {
    inactive_split_bytes_ -= node->size;
  }
  return Block{node->ptr, requested, node->size, node};
}

Pool::Segment SplitPool::DoReturn(const Block& block) {
  auto* node = static_cast<BlockNode*>(block.handle);
  assert(node != nullptr && node->ptr == block.ptr && !node->free);
  SegmentNode* seg = node->segment;
  const std::size_t free_before = seg->free_bytes;
  seg->free_bytes += node->size;
  const bool idle = seg->free_bytes == seg->bytes;
  if (idle) {
    inactive_split_bytes_ -= free_before;
  } else {
    inactive_split_bytes_ += node->size;
  }
  node->free = true;
  FreeIndex& index = free_[seg->size_class];
  if (node->prev != nullptr && node->prev->free) {
    BlockNode* left = node->prev;
    index.erase(left);
    Merge(left, node);
    node = left;
  }
  if (node->next != nullptr && node->next->free) {
    index.erase(node->next);
    Merge(node, node->next);
  }
  index.insert(node);
  if (idle) idle_segments_.insert(node);
  // Everything stays cached; only Reclaim gives whole segments back.
  return Segment{nullptr, 0};
}

void SplitPool::Merge(BlockNode* into, BlockNode* absorbed) {
  into->size += absorbed->size;
  into->next = absorbed->next;
  if (absorbed->next != nullptr) absorbed->next->prev = into;
  DeleteBlockNode(absorbed);
}

void SplitPool::DoCollectReclaimable(std::uint64_t target, std::vector<Segment>* out) {
  std::uint64_t collected = 0;
  while (!idle_segments_.empty() && (target == 0 || collected < target)) {
    auto it = std::prev(idle_segments_.end());
    BlockNode* node = *it;
    idle_segments_.erase(it);
    SegmentNode* seg = node->segment;
    free_[seg->size_class].erase(node);
    out->push_back(Segment{seg->base, seg->bytes});
    collected += seg->bytes;
    DeleteBlockNode(node);
    DeleteSegment(seg);
  }
}

std::uint64_t SplitPool::DoInactiveSplitBytes() const { return inactive_split_bytes_; }

bool SplitPool::DoLayout(std::vector<LayoutSegment>* out) const {
  for (const SegmentNode* seg = segments_; seg != nullptr; seg = seg->next) {
    LayoutSegment segment{reinterpret_cast<std::uintptr_t>(seg->base), seg->bytes, {}};
    // The same rule as inactive_split_bytes_: free bytes of an idle segment are
    // reclaimable, those of a segment with a live block are fragmentation.
    const bool idle = seg->free_bytes == seg->bytes;
    for (const BlockNode* node = seg->first; node != nullptr; node = node->next) {
      const BlockState state = !node->free ? BlockState::kAllocated
                               : idle      ? BlockState::kCached
                                           : BlockState::kInactiveSplit;
      segment.blocks.push_back(LayoutBlock{static_cast<std::uint64_t>(node->ptr - seg->base),
                                           node->size, state, 0});
    }
    out->push_back(std::move(segment));
  }
  return true;
}

SplitPool::BlockNode* SplitPool::NewBlockNode() {
  if (spare_nodes_ == nullptr) return new BlockNode;
  BlockNode* node = spare_nodes_;
  spare_nodes_ = node->next;
  --spare_count_;
  return node;
}

void SplitPool::DeleteBlockNode(BlockNode* node) {
  if (spare_count_ >= kMaxSpareNodes) {
    delete node;
    return;
  }
  node->next = spare_nodes_;
  spare_nodes_ = node;
  ++spare_count_;
}

void SplitPool::DeleteSegment(SegmentNode* segment) {
  if (segment->prev != nullptr) segment->prev->next = segment->next;
  if (segment->next != nullptr) segment->next->prev = segment->prev;
  if (segments_ == segment) segments_ = segment->next;
  delete segment;
}

}  // namespace ndserve
