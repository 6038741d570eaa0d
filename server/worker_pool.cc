#include "server/worker_pool.h"

#include <utility>

namespace ndserve {

WorkerPool::WorkerPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() { Shutdown(); }

void WorkerPool::Submit(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      tasks_.push_back(std::move(task));
      return;
    }
  }
  task();
}

void WorkerPool::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

size_t WorkerPool::backlog() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

bool WorkerPool::HasWorkOrStopping() const { return stopping_ || !tasks_.empty(); }

void WorkerPool::Loop() {
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &WorkerPool::HasWorkOrStopping));
      // Drain before stopping: every queued task belongs to an accepted call.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace ndserve
