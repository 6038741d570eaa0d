// kernels/cpu/parallel.h: ParallelFor covers its range exactly once in chunks of at least
// min_chunk, from one caller or many at once, and a nested call runs inline instead of
// waiting on the pool it is already part of; each thread starts at the front of its home
// range, and a held-up worker's range is taken over by the others.
#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "kernels/cpu/parallel_spin.h"

namespace ndserve::kernels::cpu {
namespace {

TEST(ParallelForTest, UsesOpenBlasThreadCount) { EXPECT_GE(IntraOpThreads(), 1); }

TEST(ParallelForTest, CoversTheRangeOnceInChunksOfAtLeastMinChunk) {
  for (int64_t n : {0, 1, 2, 7, 64, 1000, 4097}) {
    for (int64_t min_chunk : {1, 3, 100}) {
      std::vector<std::atomic<int>> hits(n);
      absl::Mutex mu;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      ParallelFor(n, min_chunk, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        absl::MutexLock lock(&mu);
        chunks.emplace_back(b, e);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " i " << i;
      for (const auto& [b, e] : chunks) {
        EXPECT_LT(b, e);
        if (n >= min_chunk) EXPECT_GE(e - b, min_chunk) << "n " << n << " chunk " << b;
      }
      EXPECT_EQ(chunks.empty(), n == 0);
    }
  }
}

// `callers` threads each call ParallelFor(n, min_chunk) `rounds` times at once, calling
// before_round(caller, round) first; every caller's range must be covered once per round.
void ExpectCallersCoverTheirRanges(int callers, int64_t n, int64_t min_chunk, int rounds,
                                   const std::function<void(int, int)>& before_round) {
  std::vector<std::vector<int>> hits(callers, std::vector<int>(n, 0));
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < rounds; ++round) {
        before_round(t, round);
        // Disjoint chunks of one call write disjoint elements: no race.
        ParallelFor(n, min_chunk, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) ++hits[t][i];
        });
      }
    });
  }
  for (std::thread& c : threads) c.join();
  for (int t = 0; t < callers; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(hits[t][i], rounds) << "caller " << t << " i " << i;
    }
  }
}

TEST(ParallelForTest, ManyCallersAtOnceEachGetTheirOwnRange) {
  ExpectCallersCoverTheirRanges(6, 5000, 16, 20, [](int, int) {});
}

TEST(ParallelForTest, NestedCallsRunInline) {
  std::atomic<int64_t> sum{0};
  ParallelFor(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const std::thread::id outer = std::this_thread::get_id();
      ParallelFor(100, 1, [&](int64_t ib, int64_t ie) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        sum.fetch_add(ie - ib);
      });
    }
  });
  EXPECT_EQ(sum.load(), 800);
}

TEST(ParallelForTest, SpinBudgetIsClampedAndSettable) {
  const int saved = ParallelSpinMicros();
  SetParallelSpinMicros(-5);
  EXPECT_EQ(ParallelSpinMicros(), 0);
  SetParallelSpinMicros(kMaxParallelSpinMicros + 1);
  EXPECT_EQ(ParallelSpinMicros(), kMaxParallelSpinMicros);
  SetParallelSpinMicros(37);
  EXPECT_EQ(ParallelSpinMicros(), 37);
  SetParallelSpinMicros(saved);
}

// With spinning off every wait blocks at once: callers and workers must still meet.
// The budget changes between rounds while other callers are inside ParallelFor.
TEST(ParallelForTest, CoversRangesWithSpinningOffAndChangingUnderway) {
  const int saved = ParallelSpinMicros();
  ExpectCallersCoverTheirRanges(4, 3001, 7, 30, [](int caller, int round) {
    if (caller == 0) SetParallelSpinMicros(round % 3 == 0 ? 0 : (round % 3 == 1 ? 1 : 200));
  });
  SetParallelSpinMicros(0);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 100; ++round) {
    ParallelFor(64, 1, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
  }
  EXPECT_EQ(sum.load(), 6400);
  SetParallelSpinMicros(saved);
}

// Home ranges (chunk_deal.h): a pool worker's first chunk is the front of its own range,
// not the next one after the caller's. Each chunk takes 20 ms, so the caller could only
// lose its front chunk to a worker that had already run its own range (80 ms or more).
TEST(ParallelForTest, EachThreadStartsAtTheFrontOfItsHomeRange) {
  const int threads = IntraOpThreads();
  if (threads < 2) GTEST_SKIP() << "one intra-op thread: no pool";
  const int chunks = 4 * threads;
  const std::thread::id caller = std::this_thread::get_id();
  absl::Mutex mu;
  std::vector<int64_t> caller_chunks;
  std::vector<std::pair<std::thread::id, int64_t>> firsts;  // each worker's first chunk
  ParallelFor(chunks, 1, [&](int64_t b, int64_t e) {
    {
      absl::MutexLock lock(&mu);
      const std::thread::id me = std::this_thread::get_id();
      if (me == caller) {
        caller_chunks.push_back(b);
      } else if (std::none_of(firsts.begin(), firsts.end(),
                              [&](const auto& f) { return f.first == me; })) {
        firsts.emplace_back(me, b);
      }
    }
    EXPECT_EQ(e, b + 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  ASSERT_FALSE(caller_chunks.empty());
  EXPECT_EQ(caller_chunks[0], 0);
  // Range h starts at h * chunks / threads = 4 * h.
  for (const auto& [worker, first] : firsts) {
    EXPECT_EQ(first % 4, 0) << "a worker began at chunk " << first;
    EXPECT_GT(first, 0);
  }
}

// A worker held up inside its first chunk (its core taken by other work) does not hold
// up the rest of its range: the caller takes the range over, chunk by chunk.
TEST(ParallelForTest, AHeldUpWorkersRangeIsTakenOver) {
  const int threads = IntraOpThreads();
  if (threads < 2) GTEST_SKIP() << "one intra-op thread: no pool";
  const int chunks = 4 * threads;
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> done{0};
  std::atomic<bool> held{false};
  ParallelFor(chunks, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != caller && !held.exchange(true)) {
      // Until every other chunk is done, or 10 s (then the others waited for this one).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (done.load() < chunks - 1 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      EXPECT_EQ(done.load(), chunks - 1) << "the other chunks waited for a held-up worker";
    }
    done.fetch_add(1);
  });
  EXPECT_EQ(done.load(), chunks);
}

}  // namespace
}  // namespace ndserve::kernels::cpu
