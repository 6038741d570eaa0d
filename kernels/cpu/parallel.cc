#include "kernels/cpu/parallel.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "base/spin_until.h"
#include "kernels/cpu/chunk_deal.h"
#include "kernels/cpu/parallel_spin.h"

namespace ndserve::kernels::cpu {
namespace {

// Set on pool workers for good and on a caller while it runs chunks: a nested
// ParallelFor then runs inline instead of queueing behind its own parent.
thread_local bool in_parallel_region = false;

// One ParallelFor call; lives on its caller's stack until every chunk is done. Its
// counters are guarded by the pool's mutex: the caller may return (and destroy it) as
// soon as `done` reaches `chunks`, so no thread touches it after that update.
struct Job {
  Job(absl::FunctionRef<void(int64_t, int64_t)> f, int64_t items, int pieces, int threads)
      : fn(f), n(items), chunks(pieces), deal(pieces, threads) {}

  absl::FunctionRef<void(int64_t, int64_t)> fn;
  int64_t n;
  int chunks;      // chunk i is [i * n / chunks, (i + 1) * n / chunks)
  ChunkDeal deal;  // who takes which chunk (chunk_deal.h)
  int done = 0;    // chunks finished
  // `done == chunks`, readable without the mutex: the caller polls it before blocking.
  std::atomic<bool> finished{false};
};

// A worker polls for the next job, and a caller for its job's last chunk, for up to
// ParallelSpinMicros() before blocking on the mutex. A transformer layer at one sequence
// is a run of parallel regions of 20-100 us each; a blocked thread's wake-up costs tens
// of microseconds on a VM's vCPU, which is most of a region (docs/design.md section 4).
// ORT's pool spins too. Through the daemon the polling pays on bert and costs a few
// percent of CPU elsewhere (docs/benchmark-history.md, "Daemon under load").
// Polls `ready` for up to ParallelSpinMicros() (base/spin_until.h); true if it holds.
template <typename F>
bool SpinUntil(F ready) {
  return ndserve::SpinUntil(ParallelSpinMicros(), ready);
}

// The workers and the jobs with unclaimed chunks. Never destroyed: workers block on the
// mutex between jobs and die with the process.
class Pool {
 public:
  explicit Pool(int workers) {
    // Worker i + 1 owns home range i + 1 of every job; the caller owns range 0.
    for (int i = 0; i < workers; ++i) std::thread([this, i] { WorkerLoop(i + 1); }).detach();
  }

  void Run(Job& job) {
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(&job);
      queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
    }
    const bool was_nested = in_parallel_region;
    in_parallel_region = true;
    int chunk;
    while (ClaimFrom(&job, /*home=*/0, &chunk)) RunChunk(&job, chunk);
    in_parallel_region = was_nested;
    SpinUntil([&job] { return job.finished.load(std::memory_order_acquire); });
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Job* j) { return j->done == j->chunks; }, &job));
  }

 private:
  void WorkerLoop(int home) {
    in_parallel_region = true;
    for (;;) {
      Job* job;
      int chunk;
      SpinUntil([this] { return queued_.load(std::memory_order_acquire) > 0; });
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](std::deque<Job*>* q) { return !q->empty(); }, &queue_));
        job = queue_.front();
        chunk = ClaimLocked(job, home);
      }
      RunChunk(job, chunk);
    }
  }

  // Takes a chunk of `job` (it has one) for thread `home`; drops the job from the queue
  // with its last.
  int ClaimLocked(Job* job, int home) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int chunk = job->deal.Take(home);
    if (job->deal.left() == 0) {
      queue_.erase(std::find(queue_.begin(), queue_.end(), job));
      queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
    }
    return chunk;
  }

  bool ClaimFrom(Job* job, int home, int* chunk) {
    absl::MutexLock lock(&mu_);
    if (job->deal.left() == 0) return false;
    *chunk = ClaimLocked(job, home);
    return true;
  }

  void RunChunk(Job* job, int chunk) {
    job->fn(chunk * job->n / job->chunks, (chunk + 1) * job->n / job->chunks);
    absl::MutexLock lock(&mu_);
    // The last touch of `job`: its caller may return once it sees either.
    if (++job->done == job->chunks) job->finished.store(true, std::memory_order_release);
  }

  absl::Mutex mu_;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> queued_{0};  // queue_.size(), for polling without the mutex
};

Pool& ThePool() {
  static Pool* pool = new Pool(IntraOpThreads() - 1);
  return *pool;
}

}  // namespace

int IntraOpThreads() {
  static const int threads = std::max(1, openblas_get_num_threads());
  return threads;
}

void ParallelFor(int64_t n, int64_t min_chunk, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  const int threads = IntraOpThreads();
  if (threads == 1 || in_parallel_region || n < 2 * min_chunk) {
    fn(0, n);
    return;
  }
  // A few chunks per thread, so a thread slowed by other work on the core (another
  // request, another process, the daemon's own threads) hands its share to the others;
  // dealt as home ranges (chunk_deal.h), so on an idle machine each thread still runs
  // the same part in every call. One chunk per thread had run mobilenet_v2 b1 4-12 %
  // faster in the engine alone but 1-4 % slower through the daemon; the home ranges made
  // it faster through both (docs/benchmark-history.md, "Zen 4 again").
  // Even chunks, no more than n / min_chunk of them, so each holds at least min_chunk.
  Job job(fn, n, static_cast<int>(std::min<int64_t>(n / min_chunk, int64_t{4} * threads)),
          threads);
  ThePool().Run(job);
}

}  // namespace ndserve::kernels::cpu
