#ifndef NDSERVE_TESTS_UNIT_ENGINE_BLOCKING_BATCH_SOURCE_H_
#define NDSERVE_TESTS_UNIT_ENGINE_BLOCKING_BATCH_SOURCE_H_

// A batch source that behaves like a synchronous gRPC stream's Read: a pull blocks until
// the "client" pushes a batch or closes (half-close: the end; with an error: that error),
// so tests can play a client that sends ahead or one that waits for each result.

#include <deque>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/batch_iterator.h"

namespace ndserve::testing_util {

class BlockingBatchSource {
 public:
  void Push(engine::HostBatch batch) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(batch));
  }
  void Close(absl::Status status = absl::OkStatus()) {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    status_ = std::move(status);
  }
  // Pulls made so far, counting one that is waiting.
  int pulls() const {
    absl::MutexLock lock(&mu_);
    return pulls_;
  }
  // Blocks until `n` pulls have been made or are waiting (no deadline: the test's
  // timeout catches a hang).
  void AwaitPulls(int n) const {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return pulls_ >= n; };
    mu_.Await(absl::Condition(&reached));
  }

  engine::BatchIterator::Source AsSource() {
    return [this]() -> absl::StatusOr<std::optional<engine::HostBatch>> {
      absl::MutexLock lock(&mu_);
      ++pulls_;
      auto has = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return closed_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&has));
      if (!queue_.empty()) {
        engine::HostBatch batch = std::move(queue_.front());
        queue_.pop_front();
        return std::optional<engine::HostBatch>(std::move(batch));
      }
      if (!status_.ok()) return status_;
      return std::optional<engine::HostBatch>();
    };
  }

 private:
  mutable absl::Mutex mu_;
  std::deque<engine::HostBatch> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int pulls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ndserve::testing_util

#endif  // NDSERVE_TESTS_UNIT_ENGINE_BLOCKING_BATCH_SOURCE_H_
