#include "server/worker_pool.h"

#include <utility>

#include "base/spin_until.h"

namespace ndserve {

WorkerPool::WorkerPool(int threads, int spin_micros) : spin_micros_(spin_micros) {
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
      queued_.store(tasks_.size(), std::memory_order_release);
      // Each spinning thread takes one task; a sleeper is woken only for the rest.
      if (tasks_.size() > static_cast<size_t>(spinners_)) work_.Signal();
      return;
    }
  }
  task();
}

void WorkerPool::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_.SignalAll();
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

size_t WorkerPool::backlog() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

void WorkerPool::Loop() {
  bool spun = false;  // whether this thread already spun since its last task
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      while (tasks_.empty() && !stopping_) {
        if (spin_micros_ > 0 && !spun) {
          ++spinners_;
          mu_.Unlock();
          SpinUntil(spin_micros_, [this] {
            return queued_.load(std::memory_order_acquire) > 0 ||
                   stopping_.load(std::memory_order_acquire);
          });
          mu_.Lock();
          --spinners_;
          spun = true;
          continue;
        }
        work_.Wait(&mu_);
      }
      // Drain before stopping: every queued task belongs to an accepted call.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      queued_.store(tasks_.size(), std::memory_order_release);
    }
    task();
    spun = false;
  }
}

}  // namespace ndserve
