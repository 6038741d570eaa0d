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
      options_(options),
      leaks_(options.debug_level) {}

Pool::~Pool() {
  SpinLockHolder lock(&mu_);
  if (const std::uint64_t live = counters_.alloc_count - counters_.free_count; live != 0) {
    LOG(ERROR) << "pool '" << name() << "' on " << device().ToString() << " destroyed with "
               << live << " live allocations ("
               << FormatBytes(counters_.allocated) << "); they leak";
  }
}

absl::StatusOr<Block> Pool::AllocateShared(std::size_t bytes, absl::string_view owner) {
  if (bytes == 0) return Block{};
  if (bytes > kMaxAllocationBytes) {
    // Before any rounding: near SIZE_MAX the pools' round-ups would wrap to zero.
    return OutOfMemory(bytes, absl::ResourceExhaustedError("larger than any device"));
  }
  Block block;
  std::uint64_t shared_allocated = 0;
  {
    // The shared-list hit: one lock, no device call, no Status built.
    SpinLockHolder lock(&mu_);
    block = DoTakeCached(bytes);
    if (!block.empty()) shared_allocated = CountAllocated(block);
  }
  if (!block.empty()) {
    if (front_ != nullptr) NotePeak(shared_allocated);
  } else {
    absl::StatusOr<Block> slow = AllocateSlow(bytes);
    if (!slow.ok()) return slow.status();
    block = *slow;
  }
  leaks_.Record(block.ptr, block.requested, owner);
  return block;
}

absl::StatusOr<Block> Pool::AllocateSlow(std::size_t bytes) {
  // Escalation ladder of docs/design.md §3; each rung runs only if the one above failed.
  absl::StatusOr<Block> block = TryAllocate(bytes);
  if (!block.ok() && front_ != nullptr && absl::IsResourceExhausted(block.status())) {
    // Another thread's cache may hold just the block needed.
    DrainThreadCaches();
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
      if (!block.empty()) shared_allocated = CountAllocated(block);
    }
    if (!block.empty()) {
      if (front_ != nullptr) NotePeak(shared_allocated);
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
    ++counters_.device_allocs;
    ++counters_.misses;
    block = DoAdoptSegment(Segment{*ptr, segment_bytes}, bytes);
    shared_allocated = CountAllocated(block);
  }
  if (front_ != nullptr) NotePeak(shared_allocated);
  return block;
}

absl::StatusOr<void*> Pool::AcquireSegment(std::size_t segment_bytes) {
  {
    SpinLockHolder lock(&mu_);
    if (options_.limit_bytes != kNoLimit &&
        (segment_bytes > options_.limit_bytes ||
         counters_.reserved > options_.limit_bytes - segment_bytes)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("pool limit of ", FormatBytes(options_.limit_bytes), " reached"));
    }
    // Reserve before the device call so concurrent misses cannot overshoot the limit.
    counters_.reserved += segment_bytes;
  }
  absl::StatusOr<void*> ptr = allocator_->Allocate(segment_bytes);
  if (!ptr.ok()) {
    SpinLockHolder lock(&mu_);
    counters_.reserved -= segment_bytes;
  }
  return ptr;
}

std::uint64_t Pool::CountAllocated(const Block& block) {
  counters_.allocated += block.size;
  counters_.requested += block.requested;
  ++counters_.alloc_count;
  // Without thread caches the shared counters are the whole truth.
  if (front_ == nullptr) UpdatePeak(counters_.allocated);
  return counters_.allocated;
}

void Pool::UpdatePeak(std::uint64_t allocated) const {
  std::uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (allocated > peak &&
         !peak_.compare_exchange_weak(peak, allocated, std::memory_order_relaxed)) {
  }
}

void Pool::NotePeak(std::uint64_t shared_allocated) {
  UpdatePeak(shared_allocated + front_->AllocatedRelaxed());
}

void Pool::FreeShared(const Block& block) {
  if (block.empty()) return;
  leaks_.Erase(block.ptr);
  const Block* one = &block;
  FreeToLists(&one, 1);
}

void Pool::FreeAll(absl::Span<const Block> blocks) {
  absl::InlinedVector<const Block*, 16> rest;
  ThreadCache* cache = front_ != nullptr ? front_->Mine() : nullptr;
  if (cache != nullptr) {
    SpinLockHolder lock(&cache->mu);
    for (const Block& b : blocks) {
      if (b.empty()) continue;
      leaks_.Erase(b.ptr);
      if (!cache->PutLocked(b)) rest.push_back(&b);
    }
  } else {
    for (const Block& b : blocks) {
      if (b.empty()) continue;
      leaks_.Erase(b.ptr);
      rest.push_back(&b);
    }
  }
  FreeToLists(rest.data(), rest.size());
}

// The shared-list side of Free: one lock for the lot; segments the policy does not
// keep go back to the device after it.
void Pool::FreeToLists(const Block* const* blocks, std::size_t n) {
  if (n == 0) return;
  absl::InlinedVector<Segment, 4> release;
  {
    SpinLockHolder lock(&mu_);
    for (std::size_t i = 0; i < n; ++i) {
      const Block& b = *blocks[i];
      counters_.allocated -= b.size;
      counters_.requested -= b.requested;
      ++counters_.free_count;
      if (Segment s = DoReturn(b); s.ptr != nullptr) release.push_back(s);
    }
  }
  ReleaseSegments(release, ReclaimReason::kAdmin, false);
}

void Pool::EnableThreadCaches() {
  // Leak tracking records every block by address under its own lock; keeping it exact
  // through thread caches would put that lock back on the hot path, and at those
  // levels speed is not the point.
  if (options_.debug_level > 0 || options_.thread_cache_bytes == 0) return;
  front_ = ThreadCacheSet::Create(this, options_.thread_cache_bytes);
}

void Pool::TakeBackLocked(const std::vector<Block>& held) {
  for (const Block& b : held) {
    // Cached blocks are whole bins, which the policy keeps: nothing to release.
    DoReturn(b);
  }
}

void Pool::DrainThreadCaches() {
  std::vector<Block> held;
  for (const std::shared_ptr<ThreadCache>& cache : front_->LockAll()) {
    cache->DrainLocked(&held);
  }
  front_->UnlockAll();
  // Counters stay: a held block was cached in the thread's view and stays cached.
  SpinLockHolder lock(&mu_);
  TakeBackLocked(held);
}

void Pool::AbsorbThreadCache(ThreadCache* cache) {
  std::vector<Block> held;
  cache->DrainLocked(&held);
  const ThreadCache::Counters c = cache->FoldLocked();
  SpinLockHolder lock(&mu_);
  TakeBackLocked(held);
  counters_.allocated += c.allocated;
  counters_.requested += c.requested;
  counters_.alloc_count += c.alloc_count;
  counters_.free_count += c.free_count;
}

void Pool::ShutdownThreadCaches() {
  if (front_ == nullptr) return;
  for (const std::shared_ptr<ThreadCache>& cache : front_->LockAll()) {
    AbsorbThreadCache(cache.get());
  }
  front_->UnlockAll();
  front_.reset();  // detaches the caches from this pool
}

std::uint64_t Pool::Reclaim(std::uint64_t target_bytes, ReclaimReason reason) {
  if (front_ != nullptr) DrainThreadCaches();
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
  SpinLockHolder lock(&mu_);
  counters_.reserved -= released;
  counters_.device_frees += segments.size();
  if (count_as_reclaim) {
    (reason == ReclaimReason::kAdmin ? counters_.reclaimed_admin : counters_.reclaimed_pressure) +=
        released;
  }
}

void Pool::AddReclaimHook(ReclaimHook hook) {
  absl::MutexLock lock(&hooks_mu_);
  hooks_.push_back(std::move(hook));
}

absl::Status Pool::OutOfMemory(std::size_t bytes, const absl::Status& cause) {
  {
    SpinLockHolder lock(&mu_);
    ++counters_.ooms;
  }
  std::string status = MemoryStatus(/*include_outstanding=*/false);
  LOG(WARNING) << "out of memory: " << FormatBytes(bytes) << " on " << device().ToString()
               << " (" << cause.message() << ")";
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory allocating ", FormatBytes(bytes), " on ", device().ToString(), ": ",
      cause.message(), ". ", status));
}

PoolStats Pool::Stats() const {
  PoolStats s;
  // Every thread cache and then the shared lists, all held at once: one consistent
  // snapshot even while threads allocate.
  ThreadCache::Counters threads;
  if (front_ != nullptr) {
    for (const std::shared_ptr<ThreadCache>& cache : front_->LockAll()) {
      const ThreadCache::Counters c = cache->CountersLocked();
      threads.allocated += c.allocated;
      threads.requested += c.requested;
      threads.alloc_count += c.alloc_count;
      threads.free_count += c.free_count;
    }
  }
  {
    SpinLockHolder lock(&mu_);
    const Counters& c = counters_;
    const std::uint64_t alloc_count = c.alloc_count + threads.alloc_count;
    const std::uint64_t free_count = c.free_count + threads.free_count;
    s.allocated_bytes = c.allocated + threads.allocated;
    s.requested_bytes = c.requested + threads.requested;
    s.reserved_bytes = c.reserved;
    s.cached_bytes = c.reserved - s.allocated_bytes;
    s.alloc_count = alloc_count;
    s.free_count = free_count;
    s.cache_hits = alloc_count - c.misses;  // every allocation not from the device
    s.cache_misses = c.misses;
    s.device_allocs = c.device_allocs;
    s.device_frees = c.device_frees;
    s.reclaimed_bytes_admin = c.reclaimed_admin;
    s.reclaimed_bytes_pressure = c.reclaimed_pressure;
    s.oom_count = c.ooms;
    s.outstanding_allocations = alloc_count - free_count;
    s.inactive_split_bytes = DoInactiveSplitBytes();
  }
  if (front_ != nullptr) front_->UnlockAll();
  UpdatePeak(s.allocated_bytes);
  s.peak_allocated_bytes = peak_.load(std::memory_order_relaxed);
  s.limit_bytes = options_.limit_bytes;
  s.device_total_bytes = allocator_->TotalBytes();
  s.device_free_bytes = allocator_->FreeBytes();
  return s;
}

std::vector<OutstandingAllocation> Pool::Outstanding() const { return leaks_.List(); }

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
