// kernels/cpu/chunk_deal.h: each thread takes its own home range front to back, then the
// fullest range's last chunk; every chunk is taken exactly once, whatever the order of
// the takers.
#include "kernels/cpu/chunk_deal.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ndserve::kernels::cpu {
namespace {

// The chunks `deal` hands out when the threads `homes` ask for one each, in that order.
std::vector<int> Takes(ChunkDeal& deal, const std::vector<int>& homes) {
  std::vector<int> chunks;
  for (int home : homes) chunks.push_back(deal.Take(home));
  return chunks;
}

TEST(ChunkDealTest, EachThreadTakesItsOwnRangeFrontToBack) {
  ChunkDeal deal(8, 2);  // ranges [0, 4) and [4, 8)
  EXPECT_EQ(Takes(deal, {1, 0, 0, 1, 0, 0}), (std::vector<int>{4, 0, 1, 5, 2, 3}));
  EXPECT_EQ(deal.left(), 2);
}

TEST(ChunkDealTest, AThreadDoneWithItsRangeTakesTheFullestRangesLastChunk) {
  ChunkDeal deal(12, 3);  // ranges [0, 4), [4, 8), [8, 12)
  EXPECT_EQ(Takes(deal, {0, 0, 0, 0, 2}), (std::vector<int>{0, 1, 2, 3, 8}));
  // Range 1 holds four, range 2 three; then three each (the first of them); then range
  // 2 holds three, range 1 two.
  EXPECT_EQ(Takes(deal, {0, 0, 0}), (std::vector<int>{7, 6, 11}));
  // The owners carry on from where they were.
  EXPECT_EQ(Takes(deal, {1, 2}), (std::vector<int>{4, 9}));
  EXPECT_EQ(deal.left(), 2);
}

TEST(ChunkDealTest, ThreadsPastTheRangesOnlyTakeWhatIsLeft) {
  ChunkDeal deal(4, 2);  // ranges [0, 2) and [2, 4)
  EXPECT_EQ(Takes(deal, {5, 5, 1, 0}), (std::vector<int>{1, 3, 2, 0}));
  EXPECT_EQ(deal.left(), 0);
}

TEST(ChunkDealTest, EveryChunkIsTakenOnceInAnyOrderOfTakers) {
  std::mt19937 rng(7);
  for (int chunks : {1, 2, 3, 7, 8, 64, 257}) {
    for (int threads : {1, 2, 3, 8, 100}) {
      ChunkDeal deal(chunks, threads);
      std::vector<int> taken(chunks, 0);
      std::uniform_int_distribution<int> taker(0, threads + 1);
      while (deal.left() > 0) {
        const int chunk = deal.Take(taker(rng));
        ASSERT_GE(chunk, 0);
        ASSERT_LT(chunk, chunks);
        ++taken[chunk];
      }
      for (int c = 0; c < chunks; ++c) {
        EXPECT_EQ(taken[c], 1) << "chunk " << c << " of " << chunks << ", " << threads;
      }
    }
  }
}

TEST(ChunkDealTest, HomeRangesSplitTheChunksEvenly) {
  // Thread h alone takes range h: 10 chunks over 4 threads are 2, 3, 2, 3.
  ChunkDeal deal(10, 4);
  EXPECT_EQ(Takes(deal, {0, 1, 2, 3}), (std::vector<int>{0, 2, 5, 7}));
}

}  // namespace
}  // namespace ndserve::kernels::cpu
