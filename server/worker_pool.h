#ifndef NDSERVE_SERVER_WORKER_POOL_H_
#define NDSERVE_SERVER_WORKER_POOL_H_

#include <atomic>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace ndserve {

// A fixed set of threads running submitted tasks in FIFO order. The inference service
// runs its blocking handlers (ModelInfer, repository loads) here, so that the
// completion-queue threads stay free to accept calls and answer cheap ones.
//
// A thread that finished a task may spin for `spin_micros` watching for the next one
// before it sleeps: handing a task to a sleeping thread costs a wake-up, tens of
// microseconds on a virtual machine's idle vCPU, on every request of a lightly loaded
// daemon (server/options.h, --infer_worker_spin_us). A task that a spinning thread will
// take wakes no sleeper; one more than the spinners can take wakes one.
//
// Owns its threads. Submit is thread-safe; Shutdown is called once, from one thread,
// and must not be called from a task.
class WorkerPool {
 public:
  // `threads` <= 0: std::thread::hardware_concurrency() (at least 1). `spin_micros` 0:
  // never spin.
  explicit WorkerPool(int threads, int spin_micros = 0);
  ~WorkerPool();  // Shutdown()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task`. After Shutdown began, runs it on the calling thread instead, so that
  // no accepted call is ever dropped.
  using Task = absl::AnyInvocable<void()>;
  void Submit(Task task);

  // Runs every queued task to completion, then joins the threads. Idempotent.
  void Shutdown();

  int size() const { return static_cast<int>(threads_.size()); }
  // Tasks queued and not yet taken by a thread.
  size_t backlog() const;

 private:
  void Loop();

  const int spin_micros_;
  mutable absl::Mutex mu_;
  absl::CondVar work_;  // a task queued that no spinning thread will take, or stopping
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  // Set under mu_; read under it, or without it by the spinning threads.
  std::atomic<bool> stopping_{false};
  int spinners_ ABSL_GUARDED_BY(mu_) = 0;
  // tasks_.size() for the spinning threads, which watch it without the lock.
  std::atomic<size_t> queued_{0};
  std::vector<std::thread> threads_;
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_WORKER_POOL_H_
