#include "memory/nd_array.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "memory/device_copy.h"

namespace ndserve {
namespace internal {

bool SmallShape::CountChecked(absl::Span<const std::int64_t> dims, std::int64_t* count) {
  std::int64_t n = 1;
  for (const std::int64_t dim : dims) {
    if (dim < 0 || __builtin_mul_overflow(n, dim, &n)) return false;
  }
  *count = n;
  return true;
}

bool SmallShape::AssignLarge(absl::Span<const std::int64_t> dims, std::int64_t* count) {
  size_ = dims.size();
  heap_.reset(new std::int64_t[dims.size()]);
  std::copy(dims.begin(), dims.end(), heap_.get());
  return CountChecked(dims, count);
}

SpinLock& TransferLock() {
  static SpinLock* lock = new SpinLock();
  return *lock;
}

void TransferGracePeriod() {
  // With one thread there is no other reader to wait for (and no fence to pay).
  if (__libc_single_threaded) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (TransferLock().IsLocked()) {
    SpinLockHolder wait(&TransferLock());
  }
}

thread_local constinit StateCache tls_state_cache = {};

namespace {

struct StateCacheReaper {
  ~StateCacheReaper() {
    tls_state_cache.limit = 0;
    while (tls_state_cache.count > 0) delete tls_state_cache.items[--tls_state_cache.count];
  }
};
thread_local StateCacheReaper tl_reaper;
thread_local constinit bool tl_reaper_registered = false;

}  // namespace

ArrayState* NewStateSlow() {
  if (ABSL_PREDICT_FALSE(!tl_reaper_registered)) {
    tl_reaper_registered = true;
    [[maybe_unused]] StateCacheReaper& reaper = tl_reaper;  // constructs it: runs at exit
    tls_state_cache.limit = StateCache::kSize;
  }
  return new ArrayState;  // not `()`: no zero-fill before the ctor
}

ArrayState* NewStateOutOfLine() {
  StateCache& cache = tls_state_cache;
  if (cache.count > 0) return cache.items[--cache.count];
  return NewStateSlow();
}

void DeleteStateSlow(ArrayState* state) {
  delete std::exchange(state->borrow, nullptr);
  if (state->inline_slot) {
    // Back to its manager's block (only Create's failures and sanitized builds come here
    // with one): the releasing store is the last touch. The name stays: the manager may
    // still hold the array after its last handle is gone, and Create clears or replaces
    // the name on the state's next life.
    state->refs.store(0, std::memory_order_release);
    return;
  }
  StateCache& cache = tls_state_cache;
  if (cache.count >= cache.limit) {
    delete state;
    return;
  }
  state->refs.store(2, std::memory_order_relaxed);
  state->freed = 0;
  state->name.clear();
  if (state->name.capacity() > 64) state->name.shrink_to_fit();
  cache.items[cache.count++] = state;
}

InlineStates::InlineStates() {
  for (ArrayState& state : states) {
    state.refs.store(0, std::memory_order_relaxed);
    state.inline_slot = true;
  }
}

namespace {

bool AllFree(const InlineStates* block) {
  for (const ArrayState& state : block->states) {
    if (!InlineStateFree(&state)) return false;
  }
  return true;
}

// Blocks whose manager was destroyed while a handle (or another manager) still held one
// of their states. Swept whenever one is added: a block waits at most until the next
// manager destroyed that way, and a handle kept forever keeps only its own block.
struct HeldBlocks {
  absl::Mutex mu;
  std::vector<InlineStates*> blocks ABSL_GUARDED_BY(mu);
};
HeldBlocks& HeldInlineBlocks() {
  static HeldBlocks* held = new HeldBlocks();
  return *held;
}

}  // namespace

void ReleaseInlineStates(InlineStates* states) {
  if (AllFree(states)) {
    delete states;
    return;
  }
  HeldBlocks& held = HeldInlineBlocks();
  std::vector<InlineStates*> free;
  {
    absl::MutexLock lock(&held.mu);
    auto still_held = std::partition(held.blocks.begin(), held.blocks.end(),
                                     [](const InlineStates* block) { return !AllFree(block); });
    free.assign(still_held, held.blocks.end());
    held.blocks.erase(still_held, held.blocks.end());
    held.blocks.push_back(states);
  }
  for (InlineStates* block : free) delete block;
}

}  // namespace internal

std::string NDArray::name() const {
  if (state_ == nullptr) return std::string();
  SpinLockHolder lock(&internal::TransferLock());
  return state_->name;
}

void NDArray::set_name(absl::string_view name) const {
  if (state_ == nullptr) return;
  std::string copy(name);
  SpinLockHolder lock(&internal::TransferLock());
  state_->name.swap(copy);
}

std::string NDArray::DebugString() const {
  if (state_ == nullptr) return "null NDArray";
  const absl::Span<const std::int64_t> shape = state_->shape.span();
  std::string name = this->name();
  std::string out = name.empty() ? std::string("unnamed array") : absl::StrCat("'", name, "'");
  absl::StrAppend(&out, " ", DTypeName(state_->dtype), "[", absl::StrJoin(shape, ","), "] on ",
                  state_->device.ToString());
  if (!valid()) absl::StrAppend(&out, " (freed)");
  return out;
}

absl::Status NDArray::UnusableError() const {
  if (state_ == nullptr) return absl::FailedPreconditionError("use of a null NDArray handle");
  // The acquire load in valid() makes `freed` visible.
  std::string how;
  switch (state_->freed_by()) {
    case internal::FreedBy::kManagerClose:
      how = absl::StrCat("freed when its manager #", state_->freed_by_uid(), " (",
                         ManagerLevelName(state_->freed_by_level()), ") closed");
      break;
    case internal::FreedBy::kUnsafeFree:
      how = "freed by UnsafeFree";
      break;
    case internal::FreedBy::kNotFreed:
      how = "freed";
      break;
  }
  return absl::FailedPreconditionError(
      absl::StrCat("use of freed memory: array ", DebugString(), " was ", how));
}

absl::Status NDArray::CopyToHost(absl::Span<std::uint8_t> out) const {
  if (!valid()) return UnusableError();
  if (out.size() != state_->nbytes) {
    return absl::InvalidArgumentError(absl::StrCat("CopyToHost of ", DebugString(), " (",
                                                   state_->nbytes, " bytes) into a buffer of ",
                                                   out.size(), " bytes"));
  }
  return CopyDeviceToHost(state_->device, out.data(), state_->block.ptr, state_->nbytes);
}

absl::StatusOr<std::vector<std::uint8_t>> NDArray::ToHost() const {
  if (!valid()) return UnusableError();
  std::vector<std::uint8_t> out(state_->nbytes);
  absl::Status status = CopyToHost(absl::MakeSpan(out));
  if (!status.ok()) return status;
  return out;
}

absl::Status NDArray::CopyFromHost(absl::Span<const std::uint8_t> bytes) const {
  if (!valid()) return UnusableError();
  if (bytes.size() != state_->nbytes) {
    return absl::InvalidArgumentError(absl::StrCat("CopyFromHost into ", DebugString(), " (",
                                                   state_->nbytes, " bytes) from ", bytes.size(),
                                                   " bytes"));
  }
  return CopyHostToDevice(state_->device, state_->block.ptr, bytes.data(), bytes.size());
}

}  // namespace ndserve
