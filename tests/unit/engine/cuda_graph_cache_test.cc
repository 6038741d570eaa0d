// CudaGraphCache's bookkeeping with fake graphs: when it asks for a capture, what it
// replays, what it evicts, and that every graph is deleted exactly once.
#include "engine/cuda_graph_cache.h"

#include <memory>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ndserve::engine {
namespace {

using Action = CudaGraphCache::Action;

CudaGraphKey Key(int64_t batch, int64_t version = 1) { return {version, {{batch, 64}, {batch}}}; }

// Fake graphs: distinct addresses from a vector; the deleter records what it freed.
class Graphs {
 public:
  CudaGraphCache::Handle Make() {
    handles_.push_back(std::make_unique<int>(0));
    live_.insert(handles_.back().get());
    return handles_.back().get();
  }
  CudaGraphCache::Deleter Deleter() {
    return [this](CudaGraphCache::Handle h) {
      EXPECT_EQ(live_.erase(h), 1u) << "deleted twice or never made";
      deleted_.push_back(h);
    };
  }
  int live() const { return static_cast<int>(live_.size()); }
  const std::vector<CudaGraphCache::Handle>& deleted() const { return deleted_; }

 private:
  std::vector<std::unique_ptr<int>> handles_;
  std::set<CudaGraphCache::Handle> live_;
  std::vector<CudaGraphCache::Handle> deleted_;
};

// Runs `key` the way a predictor would: capture when asked.
Action RunOnce(CudaGraphCache& cache, Graphs& graphs, const CudaGraphKey& key) {
  CudaGraphCache::Decision d = cache.Decide(key);
  if (d.action == Action::kCapture) cache.Insert(key, graphs.Make());
  return d.action;
}

TEST(CudaGraphCacheTest, CapturesOnTheNthSightingThenReplays) {
  Graphs graphs;
  CudaGraphCache cache({.capture_after = 3}, graphs.Deleter());
  EXPECT_EQ(RunOnce(cache, graphs, Key(1)), Action::kRun);
  EXPECT_EQ(RunOnce(cache, graphs, Key(1)), Action::kRun);
  EXPECT_EQ(RunOnce(cache, graphs, Key(1)), Action::kCapture);
  CudaGraphCache::Decision d = cache.Decide(Key(1));
  EXPECT_EQ(d.action, Action::kReplay);
  EXPECT_NE(d.graph, nullptr);
  EXPECT_EQ(cache.Decide(Key(1)).graph, d.graph);
  EXPECT_EQ(cache.stats().captures, 1u);
  EXPECT_EQ(cache.stats().replays, 2u);
  EXPECT_EQ(cache.size(), 1);
}

TEST(CudaGraphCacheTest, KeysDifferByShapeAndVersion) {
  Graphs graphs;
  CudaGraphCache cache({.capture_after = 1}, graphs.Deleter());
  EXPECT_EQ(RunOnce(cache, graphs, Key(1)), Action::kCapture);
  EXPECT_EQ(RunOnce(cache, graphs, Key(2)), Action::kCapture);
  EXPECT_EQ(RunOnce(cache, graphs, Key(1, /*version=*/2)), Action::kCapture);
  EXPECT_EQ(RunOnce(cache, graphs, Key(1)), Action::kReplay);
  EXPECT_EQ(cache.size(), 3);
}

TEST(CudaGraphCacheTest, EvictsTheLeastRecentlyReplayedAndDeletesIt) {
  Graphs graphs;
  CudaGraphCache cache({.capture_after = 1, .max_graphs = 2}, graphs.Deleter());
  RunOnce(cache, graphs, Key(1));
  RunOnce(cache, graphs, Key(2));
  const CudaGraphCache::Handle two = cache.Decide(Key(2)).graph;
  const CudaGraphCache::Handle one = cache.Decide(Key(1)).graph;  // 1 is now the newest
  EXPECT_EQ(RunOnce(cache, graphs, Key(3)), Action::kCapture);         // evicts 2
  EXPECT_EQ(cache.size(), 2);
  EXPECT_THAT(graphs.deleted(), ::testing::ElementsAre(two));
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(cache.Decide(Key(1)).graph, one);
  EXPECT_EQ(cache.Decide(Key(3)).action, Action::kReplay);
  // An evicted key counts its sightings afresh.
  EXPECT_EQ(RunOnce(cache, graphs, Key(2)), Action::kCapture);
  EXPECT_EQ(graphs.live(), 2);
}

TEST(CudaGraphCacheTest, AFailedCaptureIsNotRetried) {
  Graphs graphs;
  CudaGraphCache cache({.capture_after = 2}, graphs.Deleter());
  cache.Decide(Key(4));
  ASSERT_EQ(cache.Decide(Key(4)).action, Action::kCapture);
  cache.CaptureFailed(Key(4));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(cache.Decide(Key(4)).action, Action::kRun);
  EXPECT_EQ(cache.stats().failed_captures, 1u);
  EXPECT_EQ(cache.size(), 0);
}

TEST(CudaGraphCacheTest, CountsAreBoundedByTheTrackedKeys) {
  Graphs graphs;
  CudaGraphCache cache({.capture_after = 2, .max_tracked_keys = 3}, graphs.Deleter());
  cache.Decide(Key(1));
  // Three more distinct shapes: the fourth key starts the counts over, so key 1's
  // earlier sighting is forgotten.
  cache.Decide(Key(2));
  cache.Decide(Key(3));
  cache.Decide(Key(5));
  EXPECT_EQ(cache.Decide(Key(1)).action, Action::kRun);
  EXPECT_EQ(cache.Decide(Key(1)).action, Action::kCapture);
}

TEST(CudaGraphCacheTest, ClearAndDestructionDeleteEveryGraphOnce) {
  Graphs graphs;
  {
    CudaGraphCache cache({.capture_after = 1, .max_graphs = 4}, graphs.Deleter());
    for (int64_t b = 1; b <= 3; ++b) RunOnce(cache, graphs, Key(b));
    cache.Clear();
    EXPECT_EQ(graphs.live(), 0);
    EXPECT_EQ(cache.size(), 0);
    EXPECT_EQ(cache.Decide(Key(1)).action, Action::kCapture);  // counts start over
    cache.Insert(Key(1), graphs.Make());
    RunOnce(cache, graphs, Key(2));
    EXPECT_EQ(graphs.live(), 2);
  }
  EXPECT_EQ(graphs.live(), 0);
  EXPECT_EQ(graphs.deleted().size(), 5u);
}

TEST(CudaGraphCacheTest, InsertingAKeyTwiceKeepsTheNewerGraph) {
  Graphs graphs;
  CudaGraphCache cache({.capture_after = 1}, graphs.Deleter());
  const CudaGraphCache::Handle first = graphs.Make();
  const CudaGraphCache::Handle second = graphs.Make();
  cache.Insert(Key(1), first);
  cache.Insert(Key(1), second);
  EXPECT_THAT(graphs.deleted(), ::testing::ElementsAre(first));
  EXPECT_EQ(cache.Decide(Key(1)).graph, second);
  EXPECT_EQ(cache.size(), 1);
}

}  // namespace
}  // namespace ndserve::engine
