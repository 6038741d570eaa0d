#ifndef NDSERVE_MEMORY_ND_ARRAY_H_
#define NDSERVE_MEMORY_ND_ARRAY_H_

#include <sys/single_threaded.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "memory/block.h"
#include "memory/device.h"
#include "memory/dtype.h"
#include "memory/manager_levels.h"
#include "memory/spin_lock.h"

namespace ndserve {

class NDManager;
class Pool;

namespace internal {

// Who to hand a borrowed array back to: first the manager it was taken from, then its
// permanent owner. Both are held so that "has it closed?" can be asked safely.
struct BorrowInfo {
  std::shared_ptr<NDManager> lender;
  std::shared_ptr<NDManager> home;
};

enum class FreedBy : std::uint8_t { kNotFreed, kManagerClose, kUnsafeFree };

// A shape: up to kInline dimensions in place (no allocation), more on the heap.
class SmallShape {
 public:
  static constexpr std::size_t kInline = 6;

  SmallShape() = default;
  SmallShape(const SmallShape&) = delete;
  SmallShape& operator=(const SmallShape&) = delete;

  // Copies `dims` and counts their elements in the same pass (Create's hot path reads
  // the dims once). False for a negative dim or a count past int64; the copy is then
  // unspecified and *count meaningless.
  bool AssignCounting(absl::Span<const std::int64_t> dims, std::int64_t* count) {
    // The rank and the source in locals: size_ (unsigned long) may alias the int64_t
    // stores below, so a loop bound read from it would be reloaded every iteration; and
    // the raw pointer skips the span's bounds assertion per dim.
    const std::size_t rank = dims.size();
    if (ABSL_PREDICT_FALSE(rank > kInline)) return AssignLarge(dims, count);
    const std::int64_t* in = dims.data();
    size_ = rank;
    // Every dim OR-ed together: a negative one sets the top bit, and `rank` dims each
    // below 2^kSafeBits[rank] cannot overflow the product; anything else is counted
    // again with an exact check (out of line). A heap copy from an earlier, larger
    // shape is kept (span() picks by size_).
    std::uint64_t any = 0;
    std::uint64_t n = 1;
    for (std::size_t i = 0; i < rank; ++i) {
      const std::int64_t dim = in[i];
      inline_[i] = dim;
      any |= static_cast<std::uint64_t>(dim);
      n *= static_cast<std::uint64_t>(dim);
    }
    if (ABSL_PREDICT_FALSE((any >> kSafeBits[rank]) != 0)) return CountChecked(dims, count);
    *count = static_cast<std::int64_t>(n);
    return true;
  }
  absl::Span<const std::int64_t> span() const {
    return absl::Span<const std::int64_t>(size_ > kInline ? heap_.get() : inline_, size_);
  }

 private:
  // floor(63 / rank): the bits each dim may have for any product of `rank` to fit.
  static constexpr std::uint8_t kSafeBits[kInline + 1] = {63, 63, 31, 21, 15, 12, 10};
  // AssignCounting's count with every multiplication checked.
  static bool CountChecked(absl::Span<const std::int64_t> dims, std::int64_t* count);
  // AssignCounting past kInline dims: copied to the heap.
  bool AssignLarge(absl::Span<const std::int64_t> dims, std::int64_t* count);

  std::size_t size_ = 0;
  std::int64_t inline_[kInline];
  std::unique_ptr<std::int64_t[]> heap_;
};

// The shared state behind NDArray handles. Made by NDManager::Create and kept alive by
// a reference count: one reference per handle, plus one while a manager lists it.
//
// Synchronization:
//  - shape, dtype, device, pool, block, nbytes: written before the state is published,
//    immutable afterwards.
//  - owner: the manager whose list holds the array; nullptr once the block was freed
//    (that store is the release that publishes `freed`). Changed under
//    TransferLock() by moves between managers, and by the manager that frees it.
//  - prev, next: its links in owner's list of arrays (intrusive, so that listing an
//    array allocates nothing and a closing manager walks its arrays once); guarded by
//    the owner's lock, and the closing manager's alone once it took the list.
//  - name, borrow: guarded by TransferLock() once published.
struct ArrayState {
  // What freed the block, packed into one word (FreedInfo) so that a closing manager
  // marks each of its arrays with one store: bits 0-7 the FreedBy, 8-15 the closing
  // manager's level, 16-63 its uid (uids stay far below 2^48).
  static std::uint64_t FreedInfo(FreedBy how, ManagerLevel level, std::uint64_t uid) {
    return static_cast<std::uint64_t>(how) | static_cast<std::uint64_t>(level) << 8 | uid << 16;
  }
  FreedBy freed_by() const { return static_cast<FreedBy>(freed & 0xff); }
  ManagerLevel freed_by_level() const { return static_cast<ManagerLevel>((freed >> 8) & 0xff); }
  std::uint64_t freed_by_uid() const { return freed >> 16; }

  // The handle Create returns + the owner's list; for an inline state (below) only the
  // handles: its list's hold is `owner` itself.
  std::atomic<std::int32_t> refs{2};
  DType dtype = DType::kFp32;
  // One of a sub-manager's inline states (InlineStates below), which are never deleted
  // one by one: such a state is free for its manager's next Create once no handle holds
  // it (refs == 0) and no manager holds it (owner == nullptr). Fixed for its life.
  bool inline_slot = false;
  // Linked into its owner's list through prev/next. Only an inline state held by the
  // manager it was made in is not (its manager walks its inline states instead); every
  // move into a manager lists it. Guarded by the owner's lock; false once freed.
  bool listed = false;
  std::atomic<NDManager*> owner{nullptr};
  ArrayState* prev = nullptr;
  ArrayState* next = nullptr;
  Block block;
  Pool* pool = nullptr;
  Device device;
  std::int64_t num_elements = 0;
  std::size_t nbytes = 0;
  std::uint64_t freed = 0;  // FreedInfo; 0 while not freed
  SmallShape shape;
  std::string name;
  BorrowInfo* borrow = nullptr;
};

// The first array states of a sub-manager (a request's context) live in a block its
// manager owns from its first life to its destruction, reused in every life the ring of
// context objects gives it (docs/design.md §2, "Inline array states"): Create takes the
// next one with no cache pop and no list link, Close walks them as an array, and the
// last handle's drop is one store. A state a handle or another manager still holds is
// skipped by later lives; a manager destroyed while one is held hands the block to a
// process-wide list that frees it once all its states are free.
struct InlineStates {
  static constexpr int kCount = 8;
  InlineStates();
  ArrayState states[kCount];
};
// Whether an inline state may be taken by its manager's next Create. The acquire fence
// orders the taker's writes after the last holder's releasing drop or free.
inline bool InlineStateFree(const ArrayState* state) {
  if (state->refs.load(std::memory_order_relaxed) != 0 ||
      state->owner.load(std::memory_order_relaxed) != nullptr) {
    return false;
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}
// Frees `states` now if every state is free, else later (see InlineStates).
void ReleaseInlineStates(InlineStates* states);

// States are recycled through a small per-thread cache: a request makes and drops a
// handful at a time, more than malloc's per-size fast cache holds. A state freed on
// another thread joins that thread's cache. The cache is trivially destructible, so a
// handle dropped during thread or process teardown (after its reaper ran) still finds
// it and deletes directly.
struct StateCache {
  static constexpr int kSize = 128;
  ArrayState* items[kSize];
  int count;
  // kSize while the thread's reaper is registered, 0 before that and after it ran: a
  // freed state is kept only while count < limit (one compare on the hot path).
  int limit;
};
extern thread_local constinit StateCache tls_state_cache;
// A new state when this thread's cache is empty (registers the cache on first use).
ArrayState* NewStateSlow();
// A state with every field at its default and refs == 2. Inline: Create calls it for
// every array, and the cache hit is a load and a store.
ArrayState* NewStateOutOfLine();
inline ArrayState* NewState() {
#ifdef NDSERVE_SANITIZED
  return NewStateOutOfLine();
#endif
  StateCache& cache = tls_state_cache;
  if (ABSL_PREDICT_TRUE(cache.count > 0)) return cache.items[--cache.count];
  return NewStateSlow();
}

// Serializes moves of arrays between managers (Attach, TempAttachAll, Ret, UnsafeFree,
// returning borrowed arrays) and the lookups that follow an array to its manager.
// Taken before any manager lock, never while holding one. Closing managers wait out its
// current holder (TransferGracePeriod), so a pointer read from ArrayState::owner under
// it stays valid while the lock is held.
SpinLock& TransferLock();

// Returns once nobody can still be using a pointer to a manager that they read from
// ArrayState::owner under TransferLock(), given that the caller has already stored a
// different owner (or null) into every array that named that manager. Readers hold
// the lock for as long as they use the pointer and load owner with seq_cst; so if the
// lock is free after the caller's stores and a fence, every earlier reader is done and
// every later one reads the new owner. Only when the lock is held does this wait for
// it: a closing request scope then touches no line that other threads write.
void TransferGracePeriod();

// Reference counting with the same single-thread shortcut as SpinLock: while the
// process has one thread, a plain load/store replaces the locked read-modify-write.
inline void Ref(ArrayState* state) {
  if (__libc_single_threaded) {
    state->refs.store(state->refs.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    state->refs.fetch_add(1, std::memory_order_relaxed);
  }
}
// Frees a state whose last reference is gone (into the cache when it has room).
void DeleteStateSlow(ArrayState* state);
inline void DeleteState(ArrayState* state) {
#ifdef NDSERVE_SANITIZED
  return DeleteStateSlow(state);
#endif
  // The common case inline: every array's last handle ends here. Back to a fresh
  // state's values where Create does not overwrite them (owner is null already: a state
  // is only dropped after it was freed); the shape keeps its storage. A borrow is null
  // by then (freeing or going home clears it); a name takes the slow path.
  // An inline state goes back to its manager's block by its last reference's drop: the
  // releasing store is the last touch (its next Create clears the name).
  if (state->inline_slot) {
    state->refs.store(0, std::memory_order_release);
    return;
  }
  StateCache& cache = tls_state_cache;
  if (ABSL_PREDICT_TRUE(cache.count < cache.limit && state->borrow == nullptr &&
                        state->name.empty())) {
    state->refs.store(2, std::memory_order_relaxed);
    state->freed = 0;
    cache.items[cache.count++] = state;
    return;
  }
  DeleteStateSlow(state);
}
inline void Unref(ArrayState* state) {
  // The last reference (typically a handle dropped after its scope closed): nobody else
  // can take a new one, so no read-modify-write is needed. Acquire pairs with the other
  // holders' releasing decrements.
  if (state->refs.load(std::memory_order_acquire) == 1) {
    DeleteState(state);
    return;
  }
  if (__libc_single_threaded) {
    const std::int32_t left = state->refs.load(std::memory_order_relaxed) - 1;
    state->refs.store(left, std::memory_order_relaxed);
    if (left == 0) DeleteState(state);
  } else {
    // Read first: an inline state is free once the count reads 0 (if no manager holds
    // it), and must not be touched after that.
    const bool inline_slot = state->inline_slot;
    if (state->refs.fetch_sub(1, std::memory_order_acq_rel) == 1 && !inline_slot) {
      DeleteState(state);
    }
  }
}

}  // namespace internal

// A handle to an n-dimensional array in device memory: shape, element type, device,
// an optional name and a block from the device's pool.
//
// Ownership: the handle does not own the memory; the NDManager the array is attached
// to does, and frees it when that manager closes (or on NDManager::UnsafeFree). Copying
// a handle is cheap (one reference count) and every copy names the same array. The
// metadata (shape, dtype, name, ...) stays readable through any handle for as long as
// the handle lives; the memory does not. Every accessor that touches memory checks
// first and returns FAILED_PRECONDITION "use of freed memory: ..." once the array was
// freed, so using a handle after its scope closed is an error, never a crash.
//
// Thread-safety: handles may be copied, passed and read from any thread. The bytes are
// not synchronized: writers and readers of the same array coordinate themselves, and a
// manager must not be closed while another thread still uses its arrays (the check
// above catches use after close, not a close racing a use).
class NDArray {
 public:
  NDArray() = default;  // a null handle: valid() is false, every access an error
  NDArray(const NDArray& other) : state_(other.state_) {
    if (state_ != nullptr) internal::Ref(state_);
  }
  NDArray(NDArray&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }
  NDArray& operator=(const NDArray& other) {
    NDArray copy(other);
    std::swap(state_, copy.state_);
    return *this;
  }
  NDArray& operator=(NDArray&& other) noexcept {
    std::swap(state_, other.state_);
    return *this;
  }
  ~NDArray() {
    if (state_ != nullptr) internal::Unref(state_);
  }

  // True for a non-null handle whose memory has not been freed.
  bool valid() const {
    return state_ != nullptr && state_->owner.load(std::memory_order_acquire) != nullptr;
  }
  bool is_null() const { return state_ == nullptr; }

  // Metadata; readable even after the memory was freed. Empty/zero on a null handle.
  absl::Span<const std::int64_t> shape() const {
    return state_ != nullptr ? state_->shape.span() : absl::Span<const std::int64_t>();
  }
  int rank() const { return static_cast<int>(shape().size()); }
  std::int64_t num_elements() const { return state_ != nullptr ? state_->num_elements : 0; }
  std::size_t nbytes() const { return state_ != nullptr ? state_->nbytes : 0; }
  DType dtype() const { return state_ != nullptr ? state_->dtype : DType::kFp32; }
  Device device() const { return state_ != nullptr ? state_->device : Device(); }
  std::string name() const;
  // Names the array in errors, dumps and leak reports. Thread-safe.
  void set_name(absl::string_view name) const;

  // The device address of the first element (nullptr for an empty array), or
  // FAILED_PRECONDITION "use of freed memory" once freed. What kernels use.
  absl::StatusOr<void*> Data() const {
    if (!valid()) return UnusableError();
    return state_->block.ptr;
  }
  // Data() as T*, also checking that T matches dtype() (INVALID_ARGUMENT otherwise).
  template <typename T>
  absl::StatusOr<T*> DataAs() const;

  // Copies the whole array into host memory (`out` must be exactly nbytes()).
  absl::Status CopyToHost(absl::Span<std::uint8_t> out) const;
  absl::StatusOr<std::vector<std::uint8_t>> ToHost() const;
  template <typename T>
  absl::StatusOr<std::vector<T>> ToVector() const;
  // Overwrites the whole array from host memory (`bytes` must be exactly nbytes()).
  // Writes through a const handle, as Data() does: constness is the handle's.
  absl::Status CopyFromHost(absl::Span<const std::uint8_t> bytes) const;

  // "'name' FP32[2,3] on cpu:0" (plus " (freed)" once freed).
  std::string DebugString() const;

  // Whether both handles name the same array.
  bool SameArray(const NDArray& other) const { return state_ == other.state_; }

 private:
  friend class NDManager;
  // Adopts one reference.
  explicit NDArray(internal::ArrayState* state) : state_(state) {}

  // FAILED_PRECONDITION for a null handle or a freed array, naming the array and what
  // freed it.
  absl::Status UnusableError() const;

  internal::ArrayState* state_ = nullptr;
};

template <typename T>
absl::StatusOr<T*> NDArray::DataAs() const {
  if (state_ != nullptr && state_->dtype != kDTypeOf<T>) {
    return absl::InvalidArgumentError(
        absl::StrCat("array ", DebugString(), " is not ", DTypeName(kDTypeOf<T>)));
  }
  absl::StatusOr<void*> data = Data();
  if (!data.ok()) return data.status();
  return static_cast<T*>(*data);
}

template <typename T>
absl::StatusOr<std::vector<T>> NDArray::ToVector() const {
  static_assert(!std::is_same_v<T, bool>, "std::vector<bool> is packed; use ToHost() for BOOL");
  if (state_ != nullptr && state_->dtype != kDTypeOf<T>) {
    return absl::InvalidArgumentError(
        absl::StrCat("array ", DebugString(), " is not ", DTypeName(kDTypeOf<T>)));
  }
  std::vector<T> out(static_cast<std::size_t>(num_elements()));
  absl::Status status = CopyToHost(absl::Span<std::uint8_t>(
      reinterpret_cast<std::uint8_t*>(out.data()), out.size() * sizeof(T)));
  if (!status.ok()) return status;
  return out;
}

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_ND_ARRAY_H_
