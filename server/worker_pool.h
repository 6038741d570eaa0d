#ifndef NDSERVE_SERVER_WORKER_POOL_H_
#define NDSERVE_SERVER_WORKER_POOL_H_

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
// Owns its threads. Submit is thread-safe; Shutdown is called once, from one thread,
// and must not be called from a task.
class WorkerPool {
 public:
  // `threads` <= 0: std::thread::hardware_concurrency() (at least 1).
  explicit WorkerPool(int threads);
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
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace ndserve

#endif  // NDSERVE_SERVER_WORKER_POOL_H_
