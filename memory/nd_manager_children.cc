// NDManager's tree: opening sub-managers and the sharded list of open children that a
// parent closes, dumps and counts (nd_manager.h, ChildShard).
#include <atomic>
#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/strings/str_cat.h"
#include "memory/nd_manager.h"

namespace ndserve {

namespace {

using internal::ArrayState;
using internal::FreedBy;

// Each thread adds its children to one shard of any parent, spread round-robin over
// threads, so that two request threads never share a shard (and its cache line) while
// there are no more of them than shards.
int ThisThreadsShard(int shards) {
  static std::atomic<unsigned> next{0};
  thread_local const unsigned mine = next.fetch_add(1, std::memory_order_relaxed);
  return static_cast<int>(mine % static_cast<unsigned>(shards));
}

// Every request opens and closes a context manager; its object and shared_ptr control
// block (one allocation, through allocate_shared) come from a small per-thread free list
// instead of malloc. A block released on another thread joins that thread's list. The
// list is trivially destructible, so a manager dropped during thread or process teardown
// (after the reaper ran) still finds it, sees `dead` and frees directly.
template <typename T>
class RecyclingAllocator {
 public:
  using value_type = T;
  RecyclingAllocator() = default;
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>& /*other*/) {}  // NOLINT: rebinding

  T* allocate(std::size_t n) {
    FreeList& list = free_list_;
    if (n == 1 && list.count > 0) return static_cast<T*>(list.items[--list.count]);
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) {
    FreeList& list = free_list_;
    if (n == 1 && !list.dead && list.count < kCached) {
      if (ABSL_PREDICT_FALSE(!list.registered)) {
        list.registered = true;
        [[maybe_unused]] Reaper& reaper = reaper_;  // constructs it: runs at thread exit
      }
      list.items[list.count++] = p;
      return;
    }
    std::allocator<T>().deallocate(p, n);
  }
  friend bool operator==(const RecyclingAllocator&, const RecyclingAllocator&) { return true; }

 private:
  static constexpr int kCached = 32;
  struct FreeList {
    void* items[kCached];
    int count;
    bool registered;
    bool dead;
  };
  struct Reaper {
    ~Reaper() {
      while (free_list_.count > 0) {
        std::allocator<T>().deallocate(static_cast<T*>(free_list_.items[--free_list_.count]), 1);
      }
      free_list_.dead = true;
    }
  };
  static thread_local FreeList free_list_;  // zero-initialized
  static thread_local Reaper reaper_;
};

template <typename T>
thread_local typename RecyclingAllocator<T>::FreeList RecyclingAllocator<T>::free_list_;
template <typename T>
thread_local typename RecyclingAllocator<T>::Reaper RecyclingAllocator<T>::reaper_;

// The sub-managers this thread opened last, kept after they close so that the next
// ones reuse their objects: a request's context costs no allocation, no construction
// and no destruction (docs/design.md §2, "Context objects"). A slot is reused only when
// the manager in it is closed and the ring's reference is the last one, so a handle to
// a closed manager still works on the manager it names; a manager still held when the
// ring comes round to its slot (a long-lived scope) leaves the ring, and its holders
// free it as they would any other. The ring is trivially destructible (its slots are
// raw storage, constructed when the thread first uses it), so a sub-manager opened
// during thread or process teardown, after the reaper ran, still finds it, sees `dead`
// and gets a fresh object.
struct ManagerRing {
  static constexpr int kSize = 16;  // a power of two
  using Slot = std::shared_ptr<NDManager>;
  alignas(Slot) unsigned char storage[kSize][sizeof(Slot)];
  int next;
  bool live;
  bool dead;
  Slot& slot(int i) { return *std::launder(reinterpret_cast<Slot*>(storage[i])); }
};
thread_local constinit ManagerRing tls_manager_ring = {};

struct ManagerRingReaper {
  ~ManagerRingReaper() {
    ManagerRing& ring = tls_manager_ring;
    ring.live = false;
    ring.dead = true;
    for (int i = 0; i < ManagerRing::kSize; ++i) std::destroy_at(&ring.slot(i));
  }
};
thread_local ManagerRingReaper tl_manager_ring_reaper;

ABSL_ATTRIBUTE_NOINLINE bool StartManagerRing() {
  ManagerRing& ring = tls_manager_ring;
  if (ring.dead) return false;
  for (int i = 0; i < ManagerRing::kSize; ++i) new (ring.storage[i]) ManagerRing::Slot();
  [[maybe_unused]] ManagerRingReaper& reaper = tl_manager_ring_reaper;  // runs at exit
  ring.live = true;
  return true;
}

}  // namespace

// Reusable, Reopen and NewChildObject are inline into NewSubManager, their one caller
// (every request scope starts there); the allocation is the cold path.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool NDManager::Reusable(
    const std::shared_ptr<NDManager>& manager) {
  if (manager.use_count() != 1) return false;  // 0 for an empty slot
  // use_count() is a relaxed load; the fence pairs with the releasing decrement of
  // whoever dropped the last other reference (on any thread), so their last use of the
  // object happens before Reopen writes it. close_state_'s acquire does the same for
  // the thread that closed it.
  std::atomic_thread_fence(std::memory_order_acquire);
  return manager->close_state_.load(std::memory_order_acquire) == kClosed;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline void NDManager::Reopen(std::uint64_t uid, ManagerLevel level,
                                                           Device device, Pool* pool,
                                                           internal::LevelCounters* counters,
                                                           absl::string_view name,
                                                           NDManager* parent) {
  // Close left the array list empty and the counts at zero, and took this manager out
  // of its parent's list (moving parents_reference_ out); a manager never added to a
  // tree has them at their initial values.
  uid_ = uid;
  level_ = level;
  device_ = device;
  pool_ = pool;
  counters_ = counters;
  parent_ = parent;
  if (ABSL_PREDICT_FALSE(!name.empty() || !name_.empty())) name_.assign(name.data(), name.size());
  closed_info_ = ArrayState::FreedInfo(FreedBy::kManagerClose, level, uid);
  closed_ = false;
  capped_ = false;
  refuses_ = false;
  // Its inline states start over; those still held from an earlier life are skipped
  // by the Creates they are offered to.
  if (inline_states_ != nullptr) {
    inline_next_.store(reinterpret_cast<std::uintptr_t>(inline_states_->states),
                       std::memory_order_relaxed);
  }
  if (ChildShard* shards = child_shards_.load(std::memory_order_relaxed);
      ABSL_PREDICT_FALSE(shards != nullptr)) {
    // Its children list, kept for the next life: TakeChildren emptied and closed it.
    for (int i = 0; i < kChildShards; ++i) shards[i].closed = false;
  }
  close_state_.store(kOpen, std::memory_order_relaxed);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline std::shared_ptr<NDManager> NDManager::NewChildObject(
    ManagerLevel level, absl::string_view name) {
  // The cold path: a new object.
  auto allocate = [this, level, name]() ABSL_ATTRIBUTE_NOINLINE {
    std::shared_ptr<NDManager> child =
        std::allocate_shared<NDManager>(RecyclingAllocator<NDManager>(), PrivateTag{}, NextUid(),
                                        level, device_, pool_, counters_, name, this);
    child->inline_states_ = new internal::InlineStates();
    child->inline_next_.store(reinterpret_cast<std::uintptr_t>(child->inline_states_->states),
                              std::memory_order_relaxed);
    child->inline_end_ = reinterpret_cast<std::uintptr_t>(std::end(child->inline_states_->states));
    return child;
  };
  ManagerRing& ring = tls_manager_ring;
  if (ABSL_PREDICT_TRUE(ring.live) || StartManagerRing()) {
    std::shared_ptr<NDManager>& slot = ring.slot(ring.next);
    ring.next = (ring.next + 1) & (ManagerRing::kSize - 1);
    if (ABSL_PREDICT_TRUE(Reusable(slot))) {
      slot->Reopen(NextUid(), level, device_, pool_, counters_, name, this);
      return slot;
    }
    // Empty, or still held (a long-lived scope): that one leaves the ring.
    slot = allocate();
    return slot;
  }
  return allocate();
}

NDManager::ChildShard* NDManager::Shards() {
  ChildShard* shards = child_shards_.load(std::memory_order_acquire);
  if (ABSL_PREDICT_TRUE(shards != nullptr)) return shards;
  auto* made = new ChildShard[kChildShards];
  {
    // Published under mu_ and only while open: a Close that found none under mu_ can
    // rely on never getting any.
    SpinLockHolder lock(&mu_);
    if (!closed_) {
      shards = child_shards_.load(std::memory_order_relaxed);
      if (shards == nullptr) {
        child_shards_.store(made, std::memory_order_release);
        return made;
      }
    }
  }
  delete[] made;  // closed, or another thread made them first
  return shards;
}

absl::StatusOr<std::shared_ptr<NDManager>> NDManager::NewSubManager(
    std::optional<ManagerLevel> level, absl::string_view name) {
  const ManagerLevel child_level = level.value_or(level_);
  if (child_level == ManagerLevel::kSystem) {
    // Only the per-device root is "system"; a second one would confuse the metrics.
    return absl::InvalidArgumentError(
        "a new manager needs a level other than system (model, predictor, context, ...)");
  }
  std::shared_ptr<NDManager> child = NewChildObject(child_level, name);
  if (ABSL_PREDICT_FALSE(!AddChild(child))) {
    // Never in the tree: mark it closed so its destructor does nothing.
    {
      SpinLockHolder lock(&child->mu_);
      child->closed_ = true;
      child->refuses_ = true;
    }
    child->close_state_.store(kClosed, std::memory_order_release);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open a sub-manager under closed manager '", this->name(), "'"));
  }
  return child;
}

// Inline into NewSubManager, its one caller (every request scope starts there).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool NDManager::AddChild(
    const std::shared_ptr<NDManager>& child) {
  ChildShard* shards = Shards();
  if (shards == nullptr) return false;
  const int index = ThisThreadsShard(kChildShards);
  ChildShard& shard = shards[index];
  SpinLockHolder lock(&shard.mu);
  if (shard.closed) return false;
  child->shard_in_parent_ = index;
  child->parents_reference_ = child;
  child->prev_sibling_ = nullptr;
  child->next_sibling_ = shard.head;
  if (shard.head != nullptr) shard.head->prev_sibling_ = child.get();
  shard.head = child.get();
  ++shard.count;
  return true;
}

std::vector<std::shared_ptr<NDManager>> NDManager::TakeChildren(ChildShard* shards) {
  std::vector<std::shared_ptr<NDManager>> children;
  for (int i = 0; i < kChildShards; ++i) {
    ChildShard& shard = shards[i];
    SpinLockHolder lock(&shard.mu);
    shard.closed = true;
    for (NDManager* child = shard.head; child != nullptr;) {
      NDManager* next = child->next_sibling_;
      child->prev_sibling_ = child->next_sibling_ = nullptr;
      children.push_back(std::move(child->parents_reference_));
      child = next;
    }
    shard.head = nullptr;
    shard.count = 0;
  }
  return children;
}

std::vector<std::shared_ptr<NDManager>> NDManager::ChildrenSnapshot() const {
  std::vector<std::shared_ptr<NDManager>> children;
  ChildShard* shards = child_shards_.load(std::memory_order_acquire);
  if (shards == nullptr) return children;
  for (int i = 0; i < kChildShards; ++i) {
    ChildShard& shard = shards[i];
    SpinLockHolder lock(&shard.mu);
    for (NDManager* child = shard.head; child != nullptr; child = child->next_sibling_) {
      children.push_back(child->parents_reference_);
    }
  }
  return children;
}

std::size_t NDManager::child_count() const {
  ChildShard* shards = child_shards_.load(std::memory_order_acquire);
  if (shards == nullptr) return 0;
  std::size_t count = 0;
  for (int i = 0; i < kChildShards; ++i) {
    ChildShard& shard = shards[i];
    SpinLockHolder lock(&shard.mu);
    count += shard.count;
  }
  return count;
}

}  // namespace ndserve
