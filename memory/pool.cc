#include "memory/pool.h"

#include <algorithm>
#include <utility>

#include "base/logging.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ndserve {

absl::string_view PoolKindName(PoolKind kind) {
  switch (kind) {
    case PoolKind::kBinned:
      return "binned";
    case PoolKind::kSplit:
      return "split";
    case PoolKind::kSimple:
      return "simple";
    case PoolKind::kNone:
      return "none";
  }
  return "unknown";
}

absl::StatusOr<PoolKind> ParsePoolKind(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  for (PoolKind kind : {PoolKind::kBinned, PoolKind::kSplit, PoolKind::kSimple, PoolKind::kNone}) {
    if (lower == PoolKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown memory pool '", name,
                                                 "' (expected binned, split, simple or none)"));
}

std::string FormatBytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.3f %s", value, kUnits[unit]);
}

Pool::Pool(PoolKind kind, std::unique_ptr<DeviceAllocator> allocator, PoolOptions options)
    : kind_(kind),
      allocator_(std::move(allocator)),
      limit_(options.limit_bytes),
      leaks_(options.debug_level) {}

Pool::~Pool() {
  SpinLockHolder lock(&mu_);
  if (const std::uint64_t live = stats_.live_allocations(); live != 0) {
    LOG(ERROR) << "pool '" << name() << "' on " << device().ToString() << " destroyed with " << live
               << " live allocations (" << FormatBytes(stats_.allocated_bytes()) << "); they leak";
  }
}

absl::StatusOr<Block> Pool::AllocateBlock(std::size_t bytes, absl::string_view owner) {
  if (bytes == 0) return Block{};
  if (bytes > kMaxAllocationBytes) {
    // Before any rounding: near SIZE_MAX the pools' round-ups would wrap to zero.
    return OutOfMemory(bytes, absl::ResourceExhaustedError("larger than any device"));
  }
  // The block is built in the returned value itself: copying it into one afterwards
  // costs the shared-list hit a store-forwarding stall.
  absl::StatusOr<Block> result(Block{});
  Block& block = *result;
  std::uint64_t shared_allocated = 0;
  {
    // The shared-list hit: one lock, no device call, no Status built.
    SpinLockHolder lock(&mu_);
    block = DoTakeCached(bytes);
    if (!block.empty()) shared_allocated = CountAllocation(block);
  }
  if (!block.empty()) {
    if (has_front_layer_) NotePeakWithFront(shared_allocated);
  } else {
    absl::StatusOr<Block> slow = AllocateSlow(bytes);
    if (!slow.ok()) return slow.status();
    block = *slow;
  }
  leaks_.Record(block.ptr, block.requested, owner);
  return result;
}

absl::StatusOr<Block> Pool::AllocateSlow(std::size_t bytes) {
  // Escalation ladder of docs/design.md §3; each rung runs only if the one above failed.
  absl::StatusOr<Block> block = TryAllocate(bytes);
  if (!block.ok() && absl::IsResourceExhausted(block.status()) && has_front_layer_) {
    FlushFront();
    // The front layer (another thread's cache) may hold just the block needed.
    block = TryAllocate(bytes);
  }
  if (!block.ok()) {
    if (!absl::IsResourceExhausted(block.status())) return block.status();
    Reclaim(DoMinSegmentSize(bytes), ReclaimReason::kPressure);
    block = TryAllocate(bytes);
  }
  if (!block.ok()) {
    std::vector<ReclaimHook> hooks;
    {
      absl::MutexLock lock(&hooks_mu_);
      hooks = hooks_;
    }
    const std::uint64_t needed = DoMinSegmentSize(bytes);
    for (const ReclaimHook& hook : hooks) {
      if (hook(needed) == 0) continue;
      Reclaim(needed, ReclaimReason::kPressure);
      block = TryAllocate(bytes);
      if (block.ok()) break;
    }
  }
  if (!block.ok()) return OutOfMemory(bytes, block.status());
  return block;
}

// One pass of cache -> device (the cache again because another thread may have freed
// a fitting block since the caller's look).
absl::StatusOr<Block> Pool::TryAllocate(std::size_t bytes) {
  {
    std::uint64_t shared_allocated = 0;
    Block block;
    {
      SpinLockHolder lock(&mu_);
      block = DoTakeCached(bytes);
      if (!block.empty()) shared_allocated = CountAllocation(block);
    }
    if (!block.empty()) {
      if (has_front_layer_) NotePeakWithFront(shared_allocated);
      return block;
    }
  }
  std::size_t segment_bytes = DoSegmentSize(bytes);
  absl::StatusOr<void*> ptr = AcquireSegment(segment_bytes);
  if (!ptr.ok() && absl::IsResourceExhausted(ptr.status())) {
    if (const std::size_t min_bytes = DoMinSegmentSize(bytes); min_bytes < segment_bytes) {
      segment_bytes = min_bytes;
      ptr = AcquireSegment(segment_bytes);
    }
  }
  if (!ptr.ok()) return ptr.status();
  std::uint64_t shared_allocated = 0;
  Block block;
  {
    SpinLockHolder lock(&mu_);
    stats_.CountDeviceAllocation();
    block = DoAdoptSegment(Segment{*ptr, segment_bytes}, bytes);
    shared_allocated = CountAllocation(block);
  }
  if (has_front_layer_) NotePeakWithFront(shared_allocated);
  return block;
}

absl::StatusOr<void*> Pool::AcquireSegment(std::size_t segment_bytes) {
  // Reserve before the device call so concurrent misses cannot overshoot the limit.
  if (absl::Status reserved = limit_.Reserve(segment_bytes); !reserved.ok()) return reserved;
  absl::StatusOr<void*> ptr = allocator_->Allocate(segment_bytes);
  if (!ptr.ok()) limit_.Release(segment_bytes);
  return ptr;
}

void Pool::FreeBlock(const Block& block) {
  if (block.empty()) return;
  leaks_.Erase(block.ptr);
  const Block* one = &block;
  FreeToLists(absl::MakeConstSpan(&one, 1));
}

void Pool::FreeBlocks(absl::Span<const Block> blocks) {
  absl::InlinedVector<const Block*, 16> rest;
  for (const Block& b : blocks) {
    if (b.empty()) continue;
    leaks_.Erase(b.ptr);
    rest.push_back(&b);
  }
  FreeToLists(rest);
}

void Pool::FreeToLists(absl::Span<const Block* const> blocks) {
  if (blocks.empty()) return;
  absl::InlinedVector<Segment, 4> release;
  {
    SpinLockHolder lock(&mu_);
    for (const Block* b : blocks) {
      stats_.CountFree(*b);
      if (Segment s = DoReturn(*b); s.ptr != nullptr) release.push_back(s);
    }
  }
  ReleaseSegments(release, ReclaimReason::kAdmin, false);
}

std::uint64_t Pool::Reclaim(std::uint64_t target_bytes, ReclaimReason reason) {
  if (has_front_layer_) FlushFront();
  std::vector<Segment> segments;
  {
    SpinLockHolder lock(&mu_);
    DoCollectReclaimable(target_bytes, &segments);
  }
  std::uint64_t released = 0;
  for (const Segment& s : segments) released += s.bytes;
  ReleaseSegments(segments, reason, true);
  if (released > 0) {
    LOG(INFO) << "pool '" << name() << "' on " << device().ToString() << " reclaimed "
              << FormatBytes(released) << " ("
              << (reason == ReclaimReason::kAdmin ? "admin" : "pressure") << ")";
  }
  return released;
}

void Pool::ReleaseAllCached() { Reclaim(0, ReclaimReason::kAdmin); }

void Pool::ReleaseSegments(absl::Span<const Segment> segments, ReclaimReason reason,
                           bool count_as_reclaim) {
  if (segments.empty()) return;
  std::uint64_t released = 0;
  // Device calls happen outside the lock; the reservation drops only after the memory
  // is really back, so reserved bytes never understate what the device holds for us.
  for (const Segment& s : segments) {
    allocator_->Deallocate(s.ptr, s.bytes);
    released += s.bytes;
  }
  limit_.Release(released);
  SpinLockHolder lock(&mu_);
  stats_.CountDeviceFrees(segments.size(), released, count_as_reclaim, reason);
}

void Pool::AddReclaimHook(ReclaimHook hook) {
  absl::MutexLock lock(&hooks_mu_);
  hooks_.push_back(std::move(hook));
}

absl::Status Pool::OutOfMemory(std::size_t bytes, const absl::Status& cause) {
  {
    SpinLockHolder lock(&mu_);
    stats_.CountOutOfMemory();
  }
  std::string status = MemoryStatus(/*include_outstanding=*/false);
  LOG(WARNING) << "out of memory: " << FormatBytes(bytes) << " on " << device().ToString()
               << " (" << cause.message() << ")";
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory allocating ", FormatBytes(bytes), " on ", device().ToString(), ": ",
      cause.message(), ". ", status));
}

absl::string_view BlockStateName(BlockState state) {
  switch (state) {
    case BlockState::kAllocated:
      return "allocated";
    case BlockState::kCached:
      return "cached";
    case BlockState::kInactiveSplit:
      return "inactive_split";
  }
  return "unknown";
}

PoolLayout Pool::Layout() {
  if (has_front_layer_) FlushFront();
  PoolLayout layout;
  layout.device = device();
  layout.pool = std::string(name());
  {
    SpinLockHolder lock(&mu_);
    layout.lists_allocated = DoLayout(&layout.segments);
  }
  std::sort(layout.segments.begin(), layout.segments.end(),
            [](const LayoutSegment& a, const LayoutSegment& b) { return a.address < b.address; });
  return layout;
}

PoolStats Pool::Stats() const { return StatsWith(AllocationCounts{}); }

PoolStats Pool::StatsWith(const AllocationCounts& front) const {
  PoolStats s;
  {
    SpinLockHolder lock(&mu_);
    stats_.Fill(front, &s);
    // Read under mu_: a block counted as allocated above was reserved before it was
    // counted and is released only after it is uncounted, so cached never goes negative.
    s.reserved_bytes = limit_.reserved_bytes();
    s.cached_bytes = s.reserved_bytes - s.allocated_bytes;
    s.inactive_split_bytes = DoInactiveSplitBytes();
  }
  s.limit_bytes = limit_.limit_bytes();
  s.device_total_bytes = allocator_->TotalBytes();
  s.device_free_bytes = allocator_->FreeBytes();
  return s;
}

std::string Pool::MemoryStatus(bool include_outstanding) const {
  const PoolStats s = Stats();
  const std::uint64_t used = s.device_total_bytes - std::min(s.device_total_bytes,
                                                             s.device_free_bytes);
  const double percent =
      s.device_total_bytes == 0 ? 0.0 : 100.0 * static_cast<double>(used) /
                                            static_cast<double>(s.device_total_bytes);
  std::string out = absl::StrFormat(
      "Effective device memory usage: %.2f%% (%s/%s)\n"
      "Pool '%s' on %s: %s allocated, %s cached, %s reserved (limit %s)",
      percent, FormatBytes(used), FormatBytes(s.device_total_bytes), name(),
      device().ToString(), FormatBytes(s.allocated_bytes), FormatBytes(s.cached_bytes),
      FormatBytes(s.reserved_bytes),
      s.limit_bytes == kNoLimit ? std::string("none") : FormatBytes(s.limit_bytes));
  absl::StrAppendFormat(&out,
                        "; peak %s; %d live allocations; %s inactive split; %d OOMs\n",
                        FormatBytes(s.peak_allocated_bytes), s.outstanding_allocations,
                        FormatBytes(s.inactive_split_bytes), s.oom_count);
  if (include_outstanding) {
    for (const OutstandingAllocation& a : Outstanding()) {
      absl::StrAppendFormat(&out, "Outstanding allocation of %s at %#x (manager %s)\n%s",
                            FormatBytes(a.bytes), a.address,
                            a.owner.empty() ? "unknown" : a.owner, a.stack_trace);
    }
  }
  return out;
}

}  // namespace ndserve
