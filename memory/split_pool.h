#ifndef NDSERVE_MEMORY_SPLIT_POOL_H_
#define NDSERVE_MEMORY_SPLIT_POOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/container/btree_set.h"
#include "memory/pool.h"

namespace ndserve {

// Carves blocks out of larger device segments, best fit, in the style of PyTorch's
// caching allocator (docs/design.md §3). Three size classes never share a segment:
//  - small (<= 1 MiB): rounded to 512 B, cut from 2 MiB segments;
//  - large (<= 32 MiB): rounded to 128 KiB, cut from 20 MiB segments, or from a
//    segment of exactly the rounded size when the request exceeds 20 MiB;
//  - huge (> 32 MiB): rounded to 1 MiB, one segment per block, never split.
// Each class keeps its free blocks in an ordered index keyed (size, address), so the
// best fit is one lower_bound: O(log n). A free block is split when the rest is still
// a size of its class; otherwise the caller gets the whole block (Block::size says
// so). A freed block merges with free neighbours of its segment, and a segment goes
// back to the device only through Reclaim, and only once all of it is free.
//
// When a shared 2 or 20 MiB segment does not fit under the limit or on the device, the
// pool takes a segment of just the rounded size instead (DoMinSegmentSize), so a
// request that fits is never refused for the segment granularity's sake.
//
// A cached huge segment is reused only for a request (rounded) that it exceeds by at
// most 1/8 (kHugeSlackDivisor; at least 4 MiB, since huge means > 32 MiB): huge
// segments are never split, so reusing a much bigger one would pin the difference for
// the block's life, while a 12.5% bound still lets slightly varying sizes (a growing
// batch) hit the cache.
//
// Ownership and threading as Pool. The pool also owns its bookkeeping nodes; a Block's
// `handle` points at its node, which makes Free O(1) plus one index update.
class SplitPool final : public Pool {
 public:
  static constexpr std::size_t kKiB = std::size_t{1} << 10;
  static constexpr std::size_t kMiB = std::size_t{1} << 20;

  static constexpr std::size_t kSmallMax = 1 * kMiB;
  static constexpr std::size_t kSmallRound = 512;
  static constexpr std::size_t kSmallSegment = 2 * kMiB;
  static constexpr std::size_t kLargeMax = 32 * kMiB;
  static constexpr std::size_t kLargeRound = 128 * kKiB;
  static constexpr std::size_t kLargeSegment = 20 * kMiB;
  static constexpr std::size_t kHugeRound = 1 * kMiB;
  static constexpr std::size_t kHugeSlackDivisor = 8;

  SplitPool(std::unique_ptr<DeviceAllocator> allocator, PoolOptions options);
  ~SplitPool() override;

  // Bytes a request of `bytes` (> 0) is rounded to before the best-fit lookup. The
  // block handed out may be bigger when the rest of a free block was too small to
  // split off. Saturates at SIZE_MAX rather than wrapping for absurd requests.
  static std::size_t RoundedSize(std::size_t bytes);

 private:
  enum SizeClass : int { kSmall = 0, kLarge = 1, kHuge = 2, kNumClasses = 3 };

  struct SegmentNode;

  // One block of a segment, free or live. The blocks of a segment tile it without
  // gaps and are linked in address order.
  struct BlockNode {
    char* ptr;
    std::size_t size;
    BlockNode* prev;  // neighbours within the same segment, by address
    BlockNode* next;
    SegmentNode* segment;
    bool free;
  };

  struct SegmentNode {
    char* base;
    std::size_t bytes;
    std::size_t free_bytes;  // sum of the sizes of its free blocks
    SizeClass size_class;
    BlockNode* first;   // the block at `base`; splits and merges keep it in place
    SegmentNode* prev;  // list of all segments held, for the destructor
    SegmentNode* next;
  };

  // Orders free blocks by (size, address): lower_bound(size) is the best fit, and the
  // lowest address wins among equal sizes, which keeps placement deterministic.
  struct BySizeThenAddress {
    using is_transparent = void;
    struct Key {
      std::size_t size;
      const char* ptr;
    };
    static Key KeyOf(const BlockNode* n) { return Key{n->size, n->ptr}; }
    static Key KeyOf(const Key& k) { return k; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      const Key ka = KeyOf(a), kb = KeyOf(b);
      // std::less: a total order even for pointers into different allocations.
      return ka.size != kb.size ? ka.size < kb.size : std::less<const char*>()(ka.ptr, kb.ptr);
    }
  };
  using FreeIndex = absl::btree_set<BlockNode*, BySizeThenAddress>;

  static SizeClass ClassOf(std::size_t bytes);
  static bool CanSplit(SizeClass size_class, std::size_t rest);
  // Spares beyond this go back to operator delete, so a burst of fragmentation does
  // not pin host memory for the pool's lifetime.
  static constexpr std::size_t kMaxSpareNodes = 1024;

  Block DoTakeCached(std::size_t bytes) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::size_t DoSegmentSize(std::size_t bytes) const override;
  std::size_t DoMinSegmentSize(std::size_t bytes) const override;
  Block DoAdoptSegment(Segment segment, std::size_t bytes) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Segment DoReturn(const Block& block) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DoCollectReclaimable(std::uint64_t target, std::vector<Segment>* out) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::uint64_t DoInactiveSplitBytes() const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DoLayout(std::vector<LayoutSegment>* out) const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Hands out `node` (free, not indexed) for a request rounded to `rounded`: splits off
  // the rest when it stays in the class, and updates the segment's accounting.
  Block Carve(BlockNode* node, std::size_t rounded, std::size_t requested)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unlinks `absorbed` (the right-hand neighbour of `into`) and adds its bytes to `into`.
  void Merge(BlockNode* into, BlockNode* absorbed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  BlockNode* NewBlockNode() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteBlockNode(BlockNode* node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteSegment(SegmentNode* segment) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  FreeIndex free_[kNumClasses] ABSL_GUARDED_BY(mu_);
  // The single free block of each wholly free segment, largest first when walked
  // backwards: exactly what Reclaim may give back.
  FreeIndex idle_segments_ ABSL_GUARDED_BY(mu_);
  SegmentNode* segments_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Free bytes inside segments that also hold a live block (fragmentation), kept up
  // to date on every take and return so Stats() never walks the segments.
  std::uint64_t inactive_split_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Recycled BlockNodes, chained through `next`: splits and merges are frequent, and a
  // free-list pop is cheaper than operator new under the spin lock.
  BlockNode* spare_nodes_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::size_t spare_count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_SPLIT_POOL_H_
