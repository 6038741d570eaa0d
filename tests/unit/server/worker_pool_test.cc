#include "server/worker_pool.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace ndserve {
namespace {

TEST(WorkerPoolTest, RunsEveryTaskAndShutdownDrainsTheQueue) {
  std::atomic<int> done{0};
  WorkerPool pool(2);
  EXPECT_EQ(pool.size(), 2);
  for (int i = 0; i < 100; ++i) {
    pool.Submit([&done] {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      ++done;
    });
  }
  pool.Shutdown();
  EXPECT_EQ(done, 100);
}

TEST(WorkerPoolTest, SubmitAfterShutdownRunsOnTheCaller) {
  WorkerPool pool(1);
  pool.Shutdown();
  std::thread::id ran_on;
  pool.Submit([&ran_on] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  pool.Shutdown();  // idempotent
}

TEST(WorkerPoolTest, BacklogCountsTasksNoThreadHasTaken) {
  WorkerPool pool(1);
  std::atomic<bool> release{false};
  std::atomic<bool> started{false};
  pool.Submit([&] {
    started = true;
    while (!release) std::this_thread::yield();
  });
  while (!started) std::this_thread::yield();
  EXPECT_EQ(pool.backlog(), 0u);
  for (int i = 0; i < 3; ++i) pool.Submit([] {});
  EXPECT_EQ(pool.backlog(), 3u);
  release = true;
  pool.Shutdown();
  EXPECT_EQ(pool.backlog(), 0u);
}

// With spinning threads, tasks that can only finish together (each waits for all of
// them to have started) must each get a thread: a task that a spinner was counted on to
// take, but that no thread takes, would hang the round. Two rounds: the first finds the
// threads spinning from the start, the second spinning after their last task. The spin
// is half an hour, so Shutdown returning at all shows it stops the spinning threads.
TEST(WorkerPoolTest, SpinningThreadsTakeEveryTaskAndStopAtShutdown) {
  constexpr int kThreads = 4;
  WorkerPool pool(kThreads, /*spin_micros=*/2'000'000'000);
  for (int round = 1; round <= 2; ++round) {
    std::atomic<int> started{0}, done{0};
    for (int i = 0; i < kThreads; ++i) {
      pool.Submit([&] {
        ++started;
        while (started < kThreads) std::this_thread::yield();
        ++done;
      });
    }
    while (done < kThreads) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // back to spinning
  }
  // More tasks than threads: the ones no spinner takes wait for a thread to finish.
  std::atomic<int> done{0};
  for (int i = 0; i < 3 * kThreads; ++i) pool.Submit([&done] { ++done; });
  pool.Shutdown();
  EXPECT_EQ(done, 3 * kThreads);
}

TEST(WorkerPoolTest, DefaultSizeIsTheMachine) {
  WorkerPool pool(0);
  EXPECT_EQ(pool.size(), std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace ndserve
