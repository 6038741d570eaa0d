#include "memory/nd_manager.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/base/optimization.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "memory/device_copy.h"

namespace ndserve {

namespace {

using internal::ArrayState;
using internal::BorrowInfo;
using internal::FreedBy;
using internal::TransferLock;

}  // namespace

// Threads take ranges so that opening a context does not bounce one counter's cache line
// between cores.
std::uint64_t NDManager::NextUid() {
  static std::atomic<std::uint64_t> next{1};
  constexpr std::uint64_t kRange = 64;
  thread_local std::uint64_t current = 0, end = 0;
  if (current == end) {
    current = next.fetch_add(kRange, std::memory_order_relaxed);
    end = current + kRange;
  }
  return current++;
}

namespace {

// Locks two managers' locks in uid order (a single one if they are the same). Callers
// hold TransferLock(), so these pairs never interleave with each other anyway; the
// order keeps them deadlock-free against any future caller.
class PairLock {
 public:
  PairLock(SpinLock* a, std::uint64_t a_uid, SpinLock* b,
           std::uint64_t b_uid) ABSL_NO_THREAD_SAFETY_ANALYSIS
      : first_(a_uid <= b_uid ? a : b),
        second_(a == b ? nullptr : (a_uid <= b_uid ? b : a)) {
    first_->Lock();
    if (second_ != nullptr) second_->Lock();
  }
  ~PairLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (second_ != nullptr) second_->Unlock();
    first_->Unlock();
  }

 private:
  SpinLock* first_;
  SpinLock* second_;
};

// Blocks a closing manager hands back to its pool with one FreeAll per kSize. Left
// uninitialized (Block's member initializers would cost a store per field per slot on
// every Close).
class BlockBatch {
 public:
  static constexpr int kSize = 32;
  BlockBatch() {}  // NOLINT: leaves the slots uninitialized on purpose
  bool full() const { return count_ == kSize; }
  // A plain copy: the state's block was stored long before Close (BlockInRegisters' reason,
  // a load right after the pool's stores, does not apply here).
  void Add(const Block& block) { slots_[count_++] = block; }
  // For a caller that fills the slots itself (through a pointer it keeps in a register):
  // the first slot of an empty batch (room for every inline state), and the end of what
  // it wrote.
  Block* EmptySlots() {
    static_assert(internal::InlineStates::kCount <= kSize, "room for every inline state");
    return slots_;
  }
  void Filled(const Block* end) { count_ = static_cast<int>(end - slots_); }
  void FlushTo(Pool* pool) {
    if (count_ == 0) return;
    pool->FreeAll(absl::MakeConstSpan(slots_, static_cast<std::size_t>(count_)));
    count_ = 0;
  }

 private:
  int count_ = 0;
  union {
    Block slots_[kSize];
  };
};

// internal::Unref for Close's walk, where GCC would not inline it (a call per array):
// drops the list's reference.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void DropListReference(ArrayState* state) {
  if (state->refs.load(std::memory_order_acquire) == 1) {
    internal::DeleteState(state);
  } else if (__libc_single_threaded) {
    const std::int32_t left = state->refs.load(std::memory_order_relaxed) - 1;
    state->refs.store(left, std::memory_order_relaxed);
    if (left == 0) internal::DeleteState(state);
  } else if (state->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    internal::DeleteState(state);
  }
}

absl::Status ArrayError(const NDArray& array, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(what, ": array ", array.DebugString()));
}

ABSL_ATTRIBUTE_NOINLINE absl::Status ShapeError(absl::Span<const std::int64_t> shape,
                                                absl::string_view before,
                                                absl::string_view after) {
  return absl::InvalidArgumentError(absl::StrCat(before, absl::StrJoin(shape, ","), after));
}

}  // namespace

NDManager::NDManager(PrivateTag, std::uint64_t uid, ManagerLevel level, Device device, Pool* pool,
                     internal::LevelCounters* counters, absl::string_view name, NDManager* parent)
    : uid_(uid),
      level_(level),
      device_(device),
      pool_(pool),
      counters_(counters),
      parent_(parent),
      name_(name),
      closed_info_(ArrayState::FreedInfo(FreedBy::kManagerClose, level, uid)) {}

NDManager::~NDManager() {
  // Only reachable for a closed manager (an open one is held by its parent, a system one
  // by its MemorySystem until that closes it), or one that never got into the tree.
  if (close_state_.load(std::memory_order_acquire) != kClosed && !is_system()) {
    Close().IgnoreError();
  }
  delete[] child_shards_.load(std::memory_order_acquire);
  if (inline_states_ != nullptr) internal::ReleaseInlineStates(inline_states_);
}

std::string NDManager::name() const {
  if (!name_.empty()) return name_;
  return absl::StrCat(ManagerLevelName(level_), "/", uid_);
}

// ---------------------------------------------------------------------------------------
// The tree.

std::shared_ptr<NDManager> NDManager::NewSystemManager(Device device, Pool* pool,
                                                       internal::LevelCounters* counters) {
  return std::make_shared<NDManager>(PrivateTag{}, NextUid(), ManagerLevel::kSystem, device, pool,
                                     counters, absl::string_view(), nullptr);
}

absl::StatusOr<std::shared_ptr<NDManager>> NDManager::ManagerOf(const NDArray& array) {
  if (array.state_ == nullptr) return absl::FailedPreconditionError("use of a null NDArray handle");
  std::shared_ptr<NDManager> manager;
  for (bool in_transit = true; in_transit;) {
    in_transit = false;
    {
      SpinLockHolder transfer(&TransferLock());
      // seq_cst, as every owner read that dereferences the manager: see
      // TransferGracePeriod.
      NDManager* owner = array.state_->owner.load(std::memory_order_seq_cst);
      if (owner == nullptr) break;
      // Under TransferLock an owner read here cannot finish closing (Close's grace period
      // waits for the lock), so the object is alive; lock() fails only if it is being
      // destroyed.
      SpinLockHolder lock(&owner->mu_);
      if (owner->closed_ && array.state_->borrow != nullptr) {
        in_transit = true;  // on its way back to its lender; see where it lands
      } else {
        manager = owner->weak_from_this().lock();
      }
    }
    if (in_transit) std::this_thread::yield();
  }
  if (manager == nullptr) return array.UnusableError();
  return manager;
}

absl::StatusOr<std::shared_ptr<NDManager>> NDManager::SubManagerOf(const NDArray& array,
                                                                   absl::string_view name) {
  absl::StatusOr<std::shared_ptr<NDManager>> owner = ManagerOf(array);
  if (!owner.ok()) return owner.status();
  return (*owner)->NewSubManager(std::nullopt, name);
}

// ---------------------------------------------------------------------------------------
// Arrays.

void NDManager::RemoveLocked(ArrayState* state) {
  if (!state->listed) return;  // one of our inline states, held unlisted
  state->listed = false;
  if (state->prev != nullptr) {
    state->prev->next = state->next;
  } else {
    resources_ = state->next;
  }
  if (state->next != nullptr) state->next->prev = state->prev;
  state->prev = state->next = nullptr;
  --resource_count_;
  bytes_ -= state->nbytes;
}

absl::Status NDManager::RefusalError(bool closed, absl::string_view what) {
  if (closed) {
    return absl::FailedPreconditionError(
        absl::StrCat("manager '", name(), "' is closed: cannot ", what));
  }
  counters_->CapViolation(level_);
  return absl::FailedPreconditionError(absl::StrCat(
      "manager '", name(), "' is capped: cannot ", what,
      " (a capped manager takes no new arrays; create them in a sub-scope, e.g. the request's "
      "context, and Ret or copy out what must survive)"));
}

absl::Status NDManager::BytesDTypeError() {
  return absl::InvalidArgumentError(
      "BYTES tensors are variable-size; the engine keeps them as host data, not NDArrays");
}

absl::Status NDManager::FailAllocation(ArrayState* state, const absl::Status& status) {
  // Out of line on the error paths: GCC's UBSan reported an inline state cache access
  // on this path (and only here) as a null StateCache under ASan + UBSan; the slow path
  // reads the same thread-local in the TU that defines it.
  internal::DeleteStateSlow(state);
  return status;
}

absl::StatusOr<Block> NDManager::AllocateTracked(std::size_t nbytes, absl::string_view name) {
  // The leak tracker remembers who asked.
  return pool_->Allocate(nbytes, name.empty() ? this->name()
                                              : absl::StrCat(this->name(), " '", name, "'"));
}

absl::Status NDManager::RefuseShape(ArrayState* state, absl::Span<const std::int64_t> shape,
                                    absl::string_view before, absl::string_view after) {
  internal::DeleteStateSlow(state);
  return ShapeError(shape, before, after);
}

absl::Status NDManager::RefuseCreate(ArrayState* state) {
  const bool closed = this->closed();  // else capped: a manager never reopens or uncaps
  pool_->Free(state->block);
  std::string what = absl::StrCat("create an array of ", DTypeName(state->dtype), "[",
                                  absl::StrJoin(state->shape.span(), ","), "]");
  internal::DeleteStateSlow(state);
  return RefusalError(closed, what);
}

absl::StatusOr<NDArray> NDManager::Zeros(absl::Span<const std::int64_t> shape, DType dtype,
                                         absl::string_view name) {
  absl::StatusOr<NDArray> array = Create(shape, dtype, name);
  if (!array.ok()) return array;
  absl::Status status = FillZero(device_, array->state_->block.ptr, array->nbytes());
  if (!status.ok()) {
    UnsafeFree(*array).IgnoreError();
    return status;
  }
  return array;
}

absl::StatusOr<NDArray> NDManager::FromHost(absl::Span<const std::int64_t> shape, DType dtype,
                                            absl::Span<const std::uint8_t> bytes,
                                            absl::string_view name) {
  absl::StatusOr<NDArray> array = Create(shape, dtype, name);
  if (!array.ok()) return array;
  absl::Status status = array->CopyFromHost(bytes);
  if (!status.ok()) {
    UnsafeFree(*array).IgnoreError();
    return status;
  }
  return array;
}

absl::Status NDManager::Move(const NDArray& array, NDManager* to, MoveKind kind) {
  ArrayState* state = array.state_;
  if (state == nullptr) return absl::FailedPreconditionError("use of a null NDArray handle");
  // Made outside the spin lock; whatever is not used is released after it.
  auto fresh_borrow = kind == MoveKind::kBorrow ? std::make_unique<BorrowInfo>() : nullptr;
  std::unique_ptr<BorrowInfo> ended_borrow;
  std::shared_ptr<NDManager> previous_lender;
  enum class Outcome { kDone, kInTransit, kFreed, kNotHeld, kToClosed, kToCapped };
  Outcome outcome = Outcome::kInTransit;
  for (int attempt = 0; outcome == Outcome::kInTransit; ++attempt) {
    if (attempt > 0) std::this_thread::yield();
    outcome = Outcome::kDone;
    SpinLockHolder transfer(&TransferLock());
    NDManager* from = state->owner.load(std::memory_order_seq_cst);
    if (from == nullptr) {
      outcome = Outcome::kFreed;
      continue;
    }
    if (kind == MoveKind::kRet && from != this) {
      // Checked before touching `to`: a closed manager holds nothing, and its parent
      // (`to`) may be gone.
      outcome = Outcome::kNotHeld;
      continue;
    }
    PairLock locks(&from->mu_, from->uid_, &to->mu_, to->uid_);
    if (from->closed_) {
      // A closing borrower is about to hand a borrowed array back (it needs the transfer
      // lock for that, so let go and retry); anything else it is about to free.
      outcome = state->borrow != nullptr ? Outcome::kInTransit : Outcome::kFreed;
    } else if (from == to) {
      // Borrowing what one already holds changes nothing; attaching it ends a borrow.
      if (kind != MoveKind::kBorrow) ended_borrow.reset(std::exchange(state->borrow, nullptr));
    } else if (to->closed_) {
      outcome = Outcome::kToClosed;
    } else if (to->capped_) {
      outcome = Outcome::kToCapped;
    } else {
      from->RemoveLocked(state);
      to->AddLocked(state);
      state->owner.store(to, std::memory_order_relaxed);
      if (kind != MoveKind::kBorrow) {
        ended_borrow.reset(std::exchange(state->borrow, nullptr));
      } else if (state->borrow == nullptr) {
        // `from` is open, so its parent (or its memory system) holds it: lock()
        // succeeds.
        fresh_borrow->lender = from->weak_from_this().lock();
        fresh_borrow->home = fresh_borrow->lender;
        state->borrow = fresh_borrow.release();
      } else {
        // Borrowed from a borrower: hand back to it first, the home stays.
        previous_lender = std::exchange(state->borrow->lender, from->weak_from_this().lock());
      }
    }
  }
  switch (outcome) {
    case Outcome::kDone:
    case Outcome::kInTransit:  // not reached: the loop runs until it settles
      return absl::OkStatus();
    case Outcome::kFreed:
      return array.UnusableError();
    case Outcome::kNotHeld:
      return ArrayError(
          array, absl::StrCat("Ret on manager '", name(), "', which does not hold the array"));
    case Outcome::kToClosed:
    case Outcome::kToCapped:
      break;
  }
  absl::string_view verb = kind == MoveKind::kBorrow ? "temp-attach"
                           : kind == MoveKind::kRet  ? "take the Ret of"
                                                     : "attach";
  return to->RefusalError(outcome == Outcome::kToClosed,
                          absl::StrCat(verb, " array ", array.DebugString()));
}

absl::Status NDManager::Attach(const NDArray& array) {
  return Move(array, this, MoveKind::kAttach);
}

absl::Status NDManager::TempAttachAll(absl::Span<const NDArray> arrays) {
  for (const NDArray& array : arrays) {
    absl::Status status = Move(array, this, MoveKind::kBorrow);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status NDManager::Ret(const NDArray& array) {
  if (parent_ == nullptr) {
    return ArrayError(array,
                      absl::StrCat("Ret on system manager '", name(), "', which has no parent"));
  }
  return Move(array, parent_, MoveKind::kRet);
}

absl::Status NDManager::UnsafeFree(const NDArray& array) {
  ArrayState* state = array.state_;
  if (state == nullptr) return absl::FailedPreconditionError("use of a null NDArray handle");
  std::unique_ptr<BorrowInfo> ended_borrow;
  bool freed_here = false;
  for (bool in_transit = true; in_transit;) {
    in_transit = false;
    {
      SpinLockHolder transfer(&TransferLock());
      NDManager* from = state->owner.load(std::memory_order_seq_cst);
      if (from == nullptr) break;
      SpinLockHolder lock(&from->mu_);
      if (!from->closed_) {
        from->RemoveLocked(state);
        ended_borrow.reset(std::exchange(state->borrow, nullptr));
        state->freed = ArrayState::FreedInfo(FreedBy::kUnsafeFree, ManagerLevel::kSystem, 0);
        state->owner.store(nullptr, std::memory_order_release);
        freed_here = true;
      } else {
        in_transit = state->borrow != nullptr;  // else its closing manager frees it
      }
    }
    if (in_transit) std::this_thread::yield();
  }
  if (!freed_here) return array.UnusableError();
  state->pool->Free(state->block);
  // The list's reference (an inline state has none); `array` still holds one.
  if (!state->inline_slot) internal::Unref(state);
  return absl::OkStatus();
}

void NDManager::MarkReleased(ArrayState* state, FreedBy how) {
  state->freed = how == FreedBy::kManagerClose ? closed_info_
                                               : ArrayState::FreedInfo(how, level_, uid_);
  state->owner.store(nullptr, std::memory_order_release);
}

void NDManager::Release(ArrayState* state, FreedBy how) {
  // Read before the state is marked freed: an inline state nobody holds may be taken by
  // its manager's next Create from then on.
  const Block block = state->block;
  Pool* pool = state->pool;
  const bool inline_slot = state->inline_slot;
  state->listed = false;
  MarkReleased(state, how);
  pool->Free(block);
  if (!inline_slot) internal::Unref(state);
}

void NDManager::Cap() {
  SpinLockHolder lock(&mu_);
  capped_ = true;
  refuses_ = true;
}

void NDManager::Uncap() {
  SpinLockHolder lock(&mu_);
  capped_ = false;
  refuses_ = closed_;
}

bool NDManager::capped() const {
  SpinLockHolder lock(&mu_);
  return capped_;
}

bool NDManager::closed() const {
  SpinLockHolder lock(&mu_);
  return closed_;
}

absl::Status NDManager::Close() {
  if (is_system()) {
    return absl::FailedPreconditionError(absl::StrCat("the system manager of ", device_.ToString(),
                                                      " cannot be closed; it lives as long as "
                                                      "its memory system"));
  }
  return CloseImpl();
}

void NDManager::CloseSystem() { CloseImpl().IgnoreError(); }

// Inline into CloseImpl, its one caller (in this file so that it can be; the rest of
// the child list is in nd_manager_children.cc).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline std::shared_ptr<NDManager> NDManager::RemoveChild(
    NDManager* child) {
  // The child was added, so the shards exist and stay until this manager is destroyed.
  ChildShard& shard = child_shards_.load(std::memory_order_acquire)[child->shard_in_parent_];
  SpinLockHolder lock(&shard.mu);
  // A closing parent has taken the list already and closes the child itself.
  if (shard.closed) return nullptr;
  if (child->prev_sibling_ != nullptr) {
    child->prev_sibling_->next_sibling_ = child->next_sibling_;
  } else {
    shard.head = child->next_sibling_;
  }
  if (child->next_sibling_ != nullptr) child->next_sibling_->prev_sibling_ = child->prev_sibling_;
  child->prev_sibling_ = child->next_sibling_ = nullptr;
  --shard.count;
  return std::move(child->parents_reference_);
}

// Inline into Close (every request scope ends there) and CloseSystem.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status NDManager::CloseImpl() {
  // The parent's reference to us, taken out of its list below and dropped last: it may
  // be the only one left (a caller closing through a raw pointer), and this object must
  // live until Close is done with it.
  std::shared_ptr<NDManager> parents_reference;
  ArrayState* resources = nullptr;
  ChildShard* shards = nullptr;
  ArrayState* inline_end = nullptr;
  bool already = false;
  {
    SpinLockHolder lock(&mu_);
    if (closed_) {
      already = true;
    } else {
      closed_ = true;
      refuses_ = true;
      if (inline_states_ != nullptr) inline_end = OfferedInlineEnd();
      resources = std::exchange(resources_, nullptr);
      resource_count_ = 0;
      bytes_ = 0;
      shards = child_shards_.load(std::memory_order_relaxed);
    }
  }
  if (already) {
    // Idempotent, and a caller (typically a closing parent) can rely on everything being
    // freed once Close returns.
    while (close_state_.load(std::memory_order_acquire) != kClosed) std::this_thread::yield();
    return absl::OkStatus();
  }
  // Children first: what they borrowed from us comes back (and is freed below or, since
  // we are closed, freed by them).
  if (shards != nullptr) {
    for (const std::shared_ptr<NDManager>& child : TakeChildren(shards)) {
      child->Close().IgnoreError();
    }
  }

  // Nothing moves arrays in or out of a closed manager, so the list is ours alone; the
  // borrow fields were last written under mu_, which we have taken since. One walk:
  // each own array is marked freed and its reference dropped (its block copied out
  // first), and the blocks go back to the pool in batches, one pool lock per batch
  // instead of one per array.
  BorrowedList borrowed;
  BlockBatch batch;
  // The inline states first, into the empty batch (fewer than its size): the ones this
  // manager holds unlisted were made here and never moved, so none is borrowed. Moves
  // out of a closed manager are refused, so `owner` and `listed` are stable here.
  {
    const std::uint64_t freed = closed_info_;
    Block* out = batch.EmptySlots();
    for (ArrayState* state = inline_end != nullptr ? inline_states_->states : nullptr;
         state != inline_end; ++state) {
      if (state->owner.load(std::memory_order_relaxed) != this || state->listed) continue;
      *out++ = state->block;
      state->freed = freed;
      state->owner.store(nullptr, std::memory_order_release);
    }
    batch.Filled(out);
  }
  for (ArrayState* state = resources; state != nullptr;) {
    ArrayState* next = state->next;
    if (ABSL_PREDICT_FALSE(state->borrow != nullptr)) {
      borrowed.push_back(state);
    } else {
      if (ABSL_PREDICT_FALSE(batch.full())) batch.FlushTo(pool_);
      batch.Add(state->block);
      if (ABSL_PREDICT_FALSE(state->inline_slot)) {
        // Another manager's inline state, moved here: it has no list reference, and
        // once marked freed (if no handle holds it) its manager may take it again.
        state->listed = false;
        MarkReleased(state, FreedBy::kManagerClose);
      } else {
        MarkReleased(state, FreedBy::kManagerClose);
        DropListReference(state);
      }
    }
    state = next;
  }
  batch.FlushTo(pool_);
  if (!borrowed.empty()) ReturnBorrowed(borrowed);

  if (parent_ != nullptr) parents_reference = parent_->RemoveChild(this);
  // Grace period: anyone who read a pointer to this manager from an array under the
  // transfer lock is done with it once this returns (every array we held names another
  // owner or none by now), so our caller may drop the last reference after we return.
  internal::TransferGracePeriod();
  close_state_.store(kClosed, std::memory_order_release);
  return absl::OkStatus();
}

void NDManager::ReturnBorrowed(const BorrowedList& borrowed) {
  std::vector<std::unique_ptr<BorrowInfo>> ended;
  std::vector<std::shared_ptr<NDManager>> dropped_lenders;
  BorrowedList to_free;
  {
    SpinLockHolder transfer(&TransferLock());
    for (ArrayState* state : borrowed) {
      BorrowInfo* borrow = state->borrow;
      bool placed = false;
      for (NDManager* target : {borrow->lender.get(), borrow->home.get()}) {
        SpinLockHolder lock(&target->mu_);
        if (target->closed_) continue;  // a capped target is fine: it is a return
        target->AddLocked(state);
        state->owner.store(target, std::memory_order_relaxed);
        if (target == borrow->home.get()) {
          ended.emplace_back(std::exchange(state->borrow, nullptr));
        } else {
          // Back with an intermediate borrower, who returns it home when it closes.
          dropped_lenders.push_back(std::exchange(borrow->lender, borrow->home));
        }
        placed = true;
        break;
      }
      if (!placed) {
        ended.emplace_back(std::exchange(state->borrow, nullptr));
        to_free.push_back(state);
      }
    }
  }
  for (ArrayState* state : to_free) Release(state, FreedBy::kManagerClose);
}

absl::StatusOr<std::shared_ptr<NDManager>> OutputScope::Resolve(
    absl::Span<const NDArray> inputs) const {
  if (manager_ != nullptr) return manager_;
  if (inputs.empty()) {
    return absl::InvalidArgumentError("OutputScope::OfFirstInput() for an op without inputs");
  }
  return NDManager::ResultScope(inputs.front());
}

}  // namespace ndserve
