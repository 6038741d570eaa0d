#ifndef NDSERVE_MEMORY_SPIN_LOCK_H_
#define NDSERVE_MEMORY_SPIN_LOCK_H_

#include <sys/single_threaded.h>

#include <atomic>
#include <thread>

#include "absl/base/attributes.h"
#include "absl/base/thread_annotations.h"

namespace ndserve {

// A test-and-test-and-set lock for the pools' free lists. Their critical sections are a
// few dozen instructions and never contain a device call, so spinning beats parking:
// an uncontended absl::Mutex lock/unlock alone costs as much as a whole binned
// alloc+free pair. Annotated so ABSL_GUARDED_BY works with it. Not reentrant.
class ABSL_LOCKABLE SpinLock {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    // While the process has one thread nobody can contend, so skip the locked
    // read-modify-write (the same shortcut glibc's malloc takes). glibc never flips the
    // flag back to true once a second thread has existed.
    if (__libc_single_threaded) {
      locked_.store(true, std::memory_order_relaxed);
      return;
    }
    if (!locked_.exchange(true, std::memory_order_seq_cst)) return;
    LockContended();
  }
  // Takes the lock if it is free right now; never waits.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    if (__libc_single_threaded) {
      // Only this thread could hold it, but it may: a try-lock must still say so.
      if (locked_.load(std::memory_order_relaxed)) return false;
      locked_.store(true, std::memory_order_relaxed);
      return true;
    }
    return !locked_.exchange(true, std::memory_order_acquire);
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() { locked_.store(false, std::memory_order_release); }
  // Whether some thread holds the lock at this instant. Taking it is a sequentially
  // consistent exchange (the same instruction as an acquire one on x86), so that a
  // thread that stores, fences and then sees the lock free knows that the next holder
  // sees its store (the transfer grace period in nd_array.h relies on it).
  bool IsLocked() const { return locked_.load(std::memory_order_acquire); }

 private:
  // Out of line: keeps the uncontended path a handful of instructions at every caller.
  ABSL_ATTRIBUTE_NOINLINE void LockContended() {
    for (int spins = 0;; ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        // Yield once the holder has clearly been descheduled (only 2 cores here).
        if (++spins > 64) std::this_thread::yield();
      }
      if (!locked_.exchange(true, std::memory_order_seq_cst)) return;
    }
  }

  std::atomic<bool> locked_{false};
};

class ABSL_SCOPED_LOCKABLE SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock* lock) ABSL_EXCLUSIVE_LOCK_FUNCTION(lock) : lock_(lock) {
    lock_->Lock();
  }
  ~SpinLockHolder() ABSL_UNLOCK_FUNCTION() { lock_->Unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;

 private:
  SpinLock* lock_;
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_SPIN_LOCK_H_
