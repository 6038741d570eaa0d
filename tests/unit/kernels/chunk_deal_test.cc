// kernels/cpu/chunk_deal.h: each thread takes its own home range front to back, then the
// fullest range's last chunk; every chunk is taken exactly once, whatever the order of
// the takers.
#include "kernels/cpu/chunk_deal.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ndserve::kernels::cpu {
namespace {

TEST(ChunkDealTest, EachThreadTakesItsOwnRangeFrontToBack) {
  ChunkDeal deal(8, 2);  // ranges [0, 4) and [4, 8)
  EXPECT_EQ(deal.Take(1), 4);
  EXPECT_EQ(deal.Take(0), 0);
  EXPECT_EQ(deal.Take(0), 1);
  EXPECT_EQ(deal.Take(1), 5);
  EXPECT_EQ(deal.Take(0), 2);
  EXPECT_EQ(deal.Take(0), 3);
  EXPECT_EQ(deal.left(), 2);
}

TEST(ChunkDealTest, AThreadDoneWithItsRangeTakesTheFullestRangesLastChunk) {
  ChunkDeal deal(12, 3);  // ranges [0, 4), [4, 8), [8, 12)
  for (int i = 0; i < 4; ++i) EXPECT_EQ(deal.Take(0), i);
  EXPECT_EQ(deal.Take(2), 8);
  EXPECT_EQ(deal.Take(0), 7);  // range 1 holds four, range 2 three
  EXPECT_EQ(deal.Take(0), 6);  // three each: the first of them
  EXPECT_EQ(deal.Take(0), 11);
  // The owners carry on from where they were.
  EXPECT_EQ(deal.Take(1), 4);
  EXPECT_EQ(deal.Take(2), 9);
  EXPECT_EQ(deal.left(), 2);
}

TEST(ChunkDealTest, ThreadsPastTheRangesOnlyTakeWhatIsLeft) {
  ChunkDeal deal(4, 2);  // ranges [0, 2) and [2, 4)
  EXPECT_EQ(deal.Take(5), 1);
  EXPECT_EQ(deal.Take(5), 3);
  EXPECT_EQ(deal.Take(1), 2);
  EXPECT_EQ(deal.Take(0), 0);
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
  std::vector<int> mine;
  for (int h = 0; h < 4; ++h) {
    mine.push_back(deal.Take(h));
  }
  EXPECT_EQ(mine, (std::vector<int>{0, 2, 5, 7}));
}

}  // namespace
}  // namespace ndserve::kernels::cpu
