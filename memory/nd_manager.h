#ifndef NDSERVE_MEMORY_ND_MANAGER_H_
#define NDSERVE_MEMORY_ND_MANAGER_H_

#include <sys/single_threaded.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "memory/device.h"
#include "memory/dtype.h"
#include "memory/manager_levels.h"
#include "memory/nd_array.h"
#include "memory/pool.h"
#include "memory/spin_lock.h"

namespace ndserve {

// One block an array of a manager holds, as the pool handed it out (DebugInfo with
// blocks): what the memory map joins to the pools' layouts by address.
struct HeldBlock {
  std::uintptr_t address = 0;
  std::uint64_t bytes = 0;      // Block::size: what the pool set aside
  std::uint64_t requested = 0;  // Block::requested
  std::string array;            // the array's name, if it has one
};

// One node of DebugInfo(): what the admin RPC maps to its proto.
struct ManagerNodeInfo {
  std::string name;
  std::uint64_t uid = 0;
  ManagerLevel level = ManagerLevel::kSystem;
  Device device;
  bool capped = false;
  bool closed = false;
  std::int64_t resource_count = 0;  // arrays it holds now, borrowed ones included
  std::uint64_t bytes = 0;          // their bytes, as created
  // Their blocks' bytes as the pool rounded them: what the pool's allocated bytes drop
  // by when they are freed (docs/design.md §3, per-model memory).
  std::uint64_t block_bytes = 0;
  std::vector<HeldBlock> blocks;  // only from DebugInfo(/*with_blocks=*/true)
  std::vector<ManagerNodeInfo> children;
};

// A scope that owns arrays, after DJL's NDManager (docs/design.md §2).
//
// Ownership: every NDArray is attached to exactly one open manager, which owns its
// block and frees it on Close. Managers form a tree: one system manager per device and
// MemorySystem (memory_system.h; closed only when that memory system dies) -> base
// managers (model, predictor, trainer) -> sub-managers (context, batch, and scratch
// scopes). Every manager allocates from the pool its system manager was given. A parent
// holds its open children; closing a parent closes them first. Callers hold managers
// through std::shared_ptr; dropping the pointer does not close a manager (its parent
// still holds it), Close() (or ScopedManager) does. A closed manager object stays valid
// for as long as anyone holds it.
//
// Rules:
//  - Close frees the blocks of the arrays it holds, closes its children, hands arrays it
//    borrowed (TempAttachAll) back to their lender, or frees them if the lender closed
//    meanwhile. Idempotent; a second caller waits until the first one finished. The
//    system manager refuses it (its MemorySystem closes it on destruction).
//  - Cap(): later Create/Zeros/FromHost/Attach/TempAttachAll/Ret into the manager fail
//    with FAILED_PRECONDITION and count a cap violation for its level in its memory
//    system. Borrowed arrays still go back to a capped lender, and sub-managers may
//    still be opened under it.
//  - Any use of an array's memory after its manager closed or after UnsafeFree is
//    FAILED_PRECONDITION "use of freed memory", never undefined behaviour.
//
// The operation rule. DJL puts an op's output in the manager of its first input
// (ResultScope below). ndserve's engine does not rely on argument order: a request's
// PredictorContext creates every node output with Create on its own context manager.
// Other code that computes from arrays names the scope for its outputs with an
// OutputScope; OutputScope::OfFirstInput() is the DJL rule. The embedding leak (docs/design.md
// §2) is what happens when the first input is a parameter: its manager is the capped
// model manager, so the output's Create fails instead of leaking.
//
// Borrowing under concurrency. TempAttachAll moves an array, so a parameter borrowed
// by several request scopes at once hops between them (it still always ends up back
// with its owner, or freed if the owner closed). ResultScope(param) therefore names
// whichever scope borrowed it last; concurrent code says where outputs go with
// OutputScope::In(scope) instead of relying on the borrow.
//
// Thread-safety: every method may be called from any thread. Many contexts may open,
// fill and close under one predictor at once. Each manager has one SpinLock for its
// arrays and one per shard of its child list (ChildShard), each held for a few
// instructions (an uncontended absl::Mutex costs several times a whole Create on the
// pool's hot path); moves of arrays between managers go through one process-wide lock
// (see nd_array.h). Closing a manager while another thread still works with its
// arrays is a caller bug that the freed-memory check reports, not something the
// manager prevents.
class NDManager : public std::enable_shared_from_this<NDManager> {
 private:
  struct PrivateTag {};

 public:
  // System managers and the base managers directly under them come from a MemorySystem
  // (its SystemManager and NewBaseManager).
  //
  // A child on the same device; `level` defaults to this manager's level. Allowed under a
  // capped manager; FAILED_PRECONDITION under a closed one.
  absl::StatusOr<std::shared_ptr<NDManager>> NewSubManager(
      std::optional<ManagerLevel> level = std::nullopt, absl::string_view name = {});
  // A child of the manager that holds `array` (same level): the scratch scope in which
  // to compute something from `array` and Ret only the result.
  static absl::StatusOr<std::shared_ptr<NDManager>> SubManagerOf(const NDArray& array,
                                                                 absl::string_view name = {});
  // The manager that holds `array` now (the borrower while it is temp-attached).
  static absl::StatusOr<std::shared_ptr<NDManager>> ManagerOf(const NDArray& array);
  // DJL's operation rule: the manager for the output of an op whose first input is
  // `first_input`. Same as ManagerOf; named for the call sites that apply the rule.
  static absl::StatusOr<std::shared_ptr<NDManager>> ResultScope(const NDArray& first_input) {
    return ManagerOf(first_input);
  }

  // New arrays attached to this manager, from its device's pool. Create leaves the
  // contents undefined. INVALID_ARGUMENT for negative dimensions, overflowing sizes and
  // BYTES; FAILED_PRECONDITION if closed or capped; the pool's RESOURCE_EXHAUSTED.
  // Create is inline (below the class): it runs once per array of every request.
  absl::StatusOr<NDArray> Create(absl::Span<const std::int64_t> shape, DType dtype,
                                 absl::string_view name = {});
  absl::StatusOr<NDArray> Zeros(absl::Span<const std::int64_t> shape, DType dtype,
                                absl::string_view name = {});
  // Uploads `bytes` (exactly shape x dtype bytes, host memory) into a new array.
  absl::StatusOr<NDArray> FromHost(absl::Span<const std::int64_t> shape, DType dtype,
                                   absl::Span<const std::uint8_t> bytes,
                                   absl::string_view name = {});
  template <typename T>
  absl::StatusOr<NDArray> FromHostValues(absl::Span<const std::int64_t> shape,
                                         absl::Span<const T> values, absl::string_view name = {}) {
    return FromHost(
        shape, kDTypeOf<T>,
        absl::Span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(values.data()),
                                       values.size() * sizeof(T)),
        name);
  }

  // Moves `array` here for good, from whichever manager holds it (ending a borrow).
  absl::Status Attach(const NDArray& array);
  // Borrows each array: this manager holds it until it closes, then hands it back to the
  // manager it was taken from (or to its permanent owner if that one closed first, or
  // frees it if both closed). Arrays already held here are skipped. Stops at the first
  // error; arrays borrowed before it stay borrowed and go back on Close as usual.
  absl::Status TempAttachAll(absl::Span<const NDArray> arrays);
  // Moves an array this manager holds to its parent, so it survives this scope's Close.
  // FAILED_PRECONDITION if this manager does not hold it, for the system manager, or if
  // the parent is closed or capped.
  absl::Status Ret(const NDArray& array);
  // Frees `array`'s block now, whoever holds it; any later use is "use of freed memory".
  static absl::Status UnsafeFree(const NDArray& array) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  void Cap();
  // Lifts a cap: attaches are accepted again. For scopes capped only for a while (a
  // trainer scope during a training step, docs/design.md §2).
  void Uncap();
  bool capped() const;
  absl::Status Close();
  bool closed() const;

  std::uint64_t uid() const { return uid_; }
  ManagerLevel level() const { return level_; }
  Device device() const { return device_; }
  Pool* pool() const { return pool_; }
  bool is_system() const { return parent_ == nullptr; }
  // The name given at creation, or "<level>/<uid>".
  std::string name() const;
  // The parent while this manager is open; null once it closed, and for a system manager.
  std::shared_ptr<NDManager> parent() const;
  std::int64_t resource_count() const;
  std::uint64_t bytes() const;
  std::size_t child_count() const;
  // Whether this manager holds `array` right now.
  bool Holds(const NDArray& array) const;
  // Whether `array` lives in one of this manager's inline states (docs/design.md §2,
  // "Inline array states"), whoever holds it now. For tests.
  bool IsInlineState(const NDArray& array) const;

  // This subtree, one consistent line per manager (each read under its own lock):
  //   model/2 (uid=2 level=model device=cpu:0 capped) resources=1 bytes=4096
  // children indented by two spaces.
  std::string DebugDump() const;
  // The subtree with each manager's counts; `with_blocks` also lists every held block
  // (a walk over the arrays, under each manager's lock in turn).
  ManagerNodeInfo DebugInfo(bool with_blocks = false) const;

  // Use NewSubManager or a MemorySystem; public only for std::allocate_shared.
  NDManager(PrivateTag, std::uint64_t uid, ManagerLevel level, Device device, Pool* pool,
            internal::LevelCounters* counters, absl::string_view name, NDManager* parent);
  ~NDManager();
  NDManager(const NDManager&) = delete;
  NDManager& operator=(const NDManager&) = delete;

 private:
  friend class MemorySystem;
  enum class MoveKind { kAttach, kBorrow, kRet };
  enum CloseState : int { kOpen, kClosing, kClosed };
  using BorrowedList = absl::InlinedVector<internal::ArrayState*, 4>;

  // These lock other managers' locks besides (or instead of) this one's.
  absl::Status Move(const NDArray& array, NDManager* to,
                    MoveKind kind) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  ABSL_ATTRIBUTE_ALWAYS_INLINE void AddLocked(internal::ArrayState* state)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    state->listed = true;
    state->prev = nullptr;
    state->next = resources_;
    if (resources_ != nullptr) resources_->prev = state;
    resources_ = state;
    ++resource_count_;
    bytes_ += state->nbytes;
  }
  void RemoveLocked(internal::ArrayState* state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `state` is one of this manager's inline states that it holds unlisted (made
  // here and never moved): counted and walked apart from the list.
  bool InlineHeldLocked(const internal::ArrayState* state) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state->owner.load(std::memory_order_relaxed) == this && !state->listed;
  }
  // The inline states this manager holds unlisted: how many, their bytes as created and
  // as the pool rounded them (`blocks` also gets each block when not null).
  void InlineHeldLocked(std::int64_t* count, std::uint64_t* bytes, std::uint64_t* block_bytes,
                        std::vector<HeldBlock>* blocks) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the inline state offered to this Create into *state if it is free; false
  // when it is not, when they are used up, or when this manager has none.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool ClaimInlineState(internal::ArrayState** state) {
    constexpr std::uintptr_t kStep = sizeof(internal::ArrayState);
    std::uintptr_t next;
    if (__libc_single_threaded) {
      next = inline_next_.load(std::memory_order_relaxed);
      if (next >= inline_end_) return false;
      inline_next_.store(next + kStep, std::memory_order_relaxed);
    } else {
      next = inline_next_.fetch_add(kStep, std::memory_order_relaxed);
      if (next >= inline_end_) return false;
    }
    *state = reinterpret_cast<internal::ArrayState*>(next);
    return internal::InlineStateFree(*state);
  }
  // The end of the inline states offered to Creates of this life, which start at
  // inline_states_->states (for Close and the counts; only with inline states).
  internal::ArrayState* OfferedInlineEnd() const {
    return reinterpret_cast<internal::ArrayState*>(
        std::min(inline_next_.load(std::memory_order_relaxed), inline_end_));
  }
  // The error for an attach into this manager, which is closed or capped (a cap
  // violation is counted).
  absl::Status RefusalError(bool closed, absl::string_view what);
  // Create's cold paths: the allocation at leak-tracking debug levels (with the owner's
  // name), a BYTES dtype, a failed allocation (gives the state back), and the refusal of
  // a closed or capped manager (frees what was made).
  ABSL_ATTRIBUTE_NOINLINE static absl::Status BytesDTypeError();
  ABSL_ATTRIBUTE_NOINLINE static absl::Status FailAllocation(internal::ArrayState* state,
                                                             const absl::Status& status);
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<Block> AllocateTracked(std::size_t nbytes,
                                                                absl::string_view name);
  ABSL_ATTRIBUTE_NOINLINE absl::Status RefuseCreate(internal::ArrayState* state);
  // Create's refusal of a bad shape: gives the state back.
  ABSL_ATTRIBUTE_NOINLINE static absl::Status RefuseShape(internal::ArrayState* state,
                                                          absl::Span<const std::int64_t> shape,
                                                          absl::string_view before,
                                                          absl::string_view after);
  void ReturnBorrowed(const BorrowedList& borrowed) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // The open children, spread over kChildShards lists, each with its own lock on its own
  // cache line: threads that open and close contexts under one predictor at once pick
  // different shards (by thread), so a request touches no line another thread writes.
  // Lists are intrusive (prev_sibling_/next_sibling_ in the child), so registering a
  // child allocates nothing. A shard's `closed` is set by its manager's Close, which
  // takes the list; a child added before that is closed by it, later ones are refused.
  struct alignas(64) ChildShard {
    SpinLock mu;
    bool closed ABSL_GUARDED_BY(mu) = false;
    NDManager* head ABSL_GUARDED_BY(mu) = nullptr;
    std::size_t count ABSL_GUARDED_BY(mu) = 0;
  };
  static constexpr int kChildShards = 8;
  // This manager's shards, made when its first child opens (most managers never have
  // one); null if it closed before that.
  ChildShard* Shards();
  // Links `child` into this thread's shard with the list's reference to it. False if
  // this manager is closed (or closing) and refuses children.
  bool AddChild(const std::shared_ptr<NDManager>& child);
  // Takes `child` out of the open list and hands back the list's reference (null if this
  // manager is closing and closes it itself).
  std::shared_ptr<NDManager> RemoveChild(NDManager* child);
  // For Close, with the shards it found: refuses further children and hands over every
  // open one.
  std::vector<std::shared_ptr<NDManager>> TakeChildren(ChildShard* shards);
  // The open children now (for the dump and the level sums).
  std::vector<std::shared_ptr<NDManager>> ChildrenSnapshot() const;
  // Adds this subtree's gauges (live managers, arrays, bytes per level): summed when
  // someone asks, so opening a scope or creating an array updates no shared counter.
  void AccumulateLevels(ManagerLevelSnapshot* snapshot) const;
  // Process-wide, unique, increasing per thread.
  static std::uint64_t NextUid();
  // The object for a new sub-manager of this one, not yet in the tree: a closed one of
  // this thread's that nobody holds any more, reopened, or a new one (see
  // nd_manager_children.cc, ManagerRing).
  std::shared_ptr<NDManager> NewChildObject(ManagerLevel level, absl::string_view name);
  // Back to a new manager's state with these settings. Only for a closed manager whose
  // one reference is the caller's: nothing else can reach it.
  void Reopen(std::uint64_t uid, ManagerLevel level, Device device, Pool* pool,
              internal::LevelCounters* counters, absl::string_view name,
              NDManager* parent) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Whether the ring may reopen `manager`: closed, and the caller's reference the only one.
  static bool Reusable(const std::shared_ptr<NDManager>& manager);
  // For MemorySystem: the root of `device`'s tree over `pool`, and its close when the
  // memory system dies (the one Close a system manager takes).
  static std::shared_ptr<NDManager> NewSystemManager(Device device, Pool* pool,
                                                     internal::LevelCounters* counters);
  void CloseSystem();
  absl::Status CloseImpl();
  // Marks `state` freed by this manager and gives its block back; drops the list's
  // reference.
  void MarkReleased(internal::ArrayState* state, internal::FreedBy how);
  void Release(internal::ArrayState* state, internal::FreedBy how);

  // Fixed while the manager is open; a sub-manager's object is reused for a later
  // sub-manager once it is closed and nobody holds it (Reopen), which sets them anew.
  std::uint64_t uid_;
  ManagerLevel level_;
  Device device_;
  Pool* pool_;
  // The memory system's counters (cap violations), shared by the whole tree.
  internal::LevelCounters* counters_;
  // Null for a system manager. Not owning: a parent outlives its children's open life
  // and their Close (its own Close closes them, or waits for them, before returning),
  // and a closed child never touches it. Holding no reference keeps the predictor's
  // reference count off every request's path.
  NDManager* parent_;
  std::string name_;
  // What Close marks each array it frees with (ArrayState::FreedInfo).
  std::uint64_t closed_info_;
  std::atomic<int> close_state_{kOpen};
  // Owned array of kChildShards (see ChildShard), or null. Set once, under mu_.
  std::atomic<ChildShard*> child_shards_{nullptr};
  // This manager's place in its parent's shard `shard_in_parent_`, guarded by that
  // shard's lock; parents_reference_ is the parent's hold on it while it is open (what
  // keeps an open child alive when its callers dropped their pointers).
  NDManager* prev_sibling_ = nullptr;
  NDManager* next_sibling_ = nullptr;
  std::shared_ptr<NDManager> parents_reference_;
  int shard_in_parent_ = 0;

  // This manager's inline array states (nd_array.h, InlineStates), for sub-managers; null
  // for system managers. Kept across lives; handed to ReleaseInlineStates on destruction.
  internal::InlineStates* inline_states_ = nullptr;
  // The address of the inline state the next Create is offered (past inline_end_: none
  // left), advanced by every Create that asks; back to the first by Reopen. Close reads
  // it under mu_: a state offered but not yet published then is refused under mu_ and
  // never held. Both 0 without inline states.
  std::atomic<std::uintptr_t> inline_next_{0};
  std::uintptr_t inline_end_ = 0;

  mutable SpinLock mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool capped_ ABSL_GUARDED_BY(mu_) = false;
  // closed_ || capped_: the one flag Create reads.
  bool refuses_ ABSL_GUARDED_BY(mu_) = false;
  std::uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The arrays it holds in its list, linked through ArrayState::prev/next, newest first,
  // and their count and bytes; the inline states it holds unlisted are counted apart.
  internal::ArrayState* resources_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::int64_t resource_count_ ABSL_GUARDED_BY(mu_) = 0;
};

namespace internal {

// A Block in four general registers, to be stored with four 8-byte moves. The pool's
// inline fast path has just written the block (on the stack) as 8-byte stores; the
// plain struct copy compiles to 16-byte loads, which the CPU cannot forward from those
// stores and stalls on until they retire: measured as about a fifth of a request
// scope's cost. The empty asm makes the compiler load each field into a general
// register instead. Loading and storing are separate so that the caller can end the
// StatusOr's life in between (its check is then known to be OK, not reloaded after
// stores that might alias it).
struct BlockInRegisters {
  BlockInRegisters() = default;
  ABSL_ATTRIBUTE_ALWAYS_INLINE explicit BlockInRegisters(const Block& from)
      : ptr(from.ptr), requested(from.requested), size(from.size), handle(from.handle) {
#if defined(__GNUC__)
    asm("" : "+r"(ptr), "+r"(requested), "+r"(size), "+r"(handle));
#endif
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE void StoreTo(Block* to) const {
    to->ptr = ptr;
    to->requested = requested;
    to->size = size;
    to->handle = handle;
  }
  void* ptr;
  std::size_t requested;
  std::size_t size;
  void* handle;
};

}  // namespace internal

// The hot path of every request: kept inline so that callers that create arrays in a
// loop pay no call and no frame per array; the error paths are out of line. The state
// is filled before the pool call, so that only it (not the shape, dtype, name and
// sizes) stays live across the call, and the dims are validated while they are copied
// into the state (one pass).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::StatusOr<NDArray> NDManager::Create(
    absl::Span<const std::int64_t> shape, DType dtype, absl::string_view name) {
  const std::size_t element = DTypeSize(dtype);
  if (ABSL_PREDICT_FALSE(element == 0)) return BytesDTypeError();
  // An inline state when the next one is free, else one from the thread's cache.
  internal::ArrayState* state;
  if (ABSL_PREDICT_TRUE(ClaimInlineState(&state))) {
    state->refs.store(1, std::memory_order_relaxed);
    // A name from an earlier life (a cached state's is cleared by its drop).
    if (ABSL_PREDICT_FALSE(name.empty() && !state->name.empty())) state->name.clear();
  } else {
    state = internal::NewState();
  }
  std::int64_t count = 0;
  std::size_t nbytes = 0;
  if (ABSL_PREDICT_FALSE(!state->shape.AssignCounting(shape, &count))) {
    return RefuseShape(state, shape, "invalid shape [", "] for a new array");
  }
  if (ABSL_PREDICT_FALSE(
          __builtin_mul_overflow(static_cast<std::size_t>(count), element, &nbytes))) {
    return RefuseShape(state, shape, "array of shape [", "] overflows size_t");
  }
  state->dtype = dtype;
  state->pool = pool_;
  state->device = device_;
  state->num_elements = count;
  state->nbytes = nbytes;
  if (!name.empty()) state->name.assign(name.data(), name.size());
  internal::BlockInRegisters block;
  {
    absl::StatusOr<Block> allocated = ABSL_PREDICT_FALSE(pool_->debug_level() > 0)
                                          ? AllocateTracked(nbytes, name)
                                          : pool_->Allocate(nbytes);
    if (ABSL_PREDICT_FALSE(!allocated.ok())) return FailAllocation(state, allocated.status());
    block = internal::BlockInRegisters(*allocated);
  }
  block.StoreTo(&state->block);
  bool refused = false;
  {
    SpinLockHolder lock(&mu_);
    refused = refuses_;
    if (ABSL_PREDICT_TRUE(!refused)) {
      state->owner.store(this, std::memory_order_relaxed);
      // An inline state is held unlisted (Close walks the inline states).
      if (!state->inline_slot) AddLocked(state);
    }
  }
  if (ABSL_PREDICT_FALSE(refused)) return RefuseCreate(state);
  return NDArray(state);
}

// Where an op puts its outputs. An op takes one and calls Resolve(inputs) once, then
// Create on the manager it gives. In(scope) is the normal case (the request's context
// or a scratch scope); OfFirstInput() applies DJL's rule. A plain value; thread-safe.
class OutputScope {
 public:
  static OutputScope In(std::shared_ptr<NDManager> manager) {
    return OutputScope(std::move(manager));
  }
  static OutputScope OfFirstInput() { return OutputScope(nullptr); }

  absl::StatusOr<std::shared_ptr<NDManager>> Resolve(absl::Span<const NDArray> inputs) const;
  bool explicit_scope() const { return manager_ != nullptr; }

 private:
  explicit OutputScope(std::shared_ptr<NDManager> manager) : manager_(std::move(manager)) {}
  std::shared_ptr<NDManager> manager_;
};

// Closes a manager when it goes out of scope (a request's context, a scratch scope).
// Move-only; not thread-safe itself (one owner), the manager is.
class ScopedManager {
 public:
  ScopedManager() = default;
  explicit ScopedManager(std::shared_ptr<NDManager> manager) : manager_(std::move(manager)) {}
  ScopedManager(ScopedManager&&) = default;
  ScopedManager& operator=(ScopedManager&& other) {
    Reset();
    manager_ = std::move(other.manager_);
    return *this;
  }
  ~ScopedManager() { Reset(); }

  NDManager* operator->() const { return manager_.get(); }
  NDManager& operator*() const { return *manager_; }
  const std::shared_ptr<NDManager>& get() const { return manager_; }
  // Closes now (errors ignored: only the system manager refuses, and it is never scoped).
  void Reset() {
    if (manager_ != nullptr) manager_->Close().IgnoreError();
    manager_.reset();
  }

 private:
  std::shared_ptr<NDManager> manager_;
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_ND_MANAGER_H_
