// The binned pool's size classes, which its lists and its thread caches share.
#include "memory/size_classes.h"

#include "gtest/gtest.h"
#include "memory/binned_pool.h"
#include "memory/thread_cache.h"

namespace ndserve {
namespace {

TEST(SizeClassesTest, EveryRequestGetsTheSmallestClassThatFits) {
  EXPECT_EQ(SizeClasses::Of(1), 0);
  EXPECT_EQ(SizeClasses::Of(512), 0);
  EXPECT_EQ(SizeClasses::Of(513), 1);
  EXPECT_EQ(SizeClasses::Of(4096), 3);
  EXPECT_EQ(SizeClasses::Of(4097), 4);
  EXPECT_EQ(SizeClasses::Of(SizeClasses::kMaxBytes), SizeClasses::kCount - 1);
  EXPECT_EQ(SizeClasses::Bytes(0), 512u);
  EXPECT_EQ(SizeClasses::Bytes(SizeClasses::kCount - 1), std::size_t{128} << 20);
  for (std::size_t bytes = 1; bytes <= SizeClasses::kMaxBytes; bytes = bytes * 3 + 1) {
    const int c = SizeClasses::Of(bytes);
    EXPECT_EQ(SizeClasses::Bytes(c), SizeClasses::RoundUp(bytes)) << bytes;
    EXPECT_GE(SizeClasses::Bytes(c), bytes);
    if (c > 0) EXPECT_LT(SizeClasses::Bytes(c - 1), bytes);
    EXPECT_EQ(SizeClasses::Of(SizeClasses::Bytes(c)), c) << "a block's own size";
  }
}

TEST(SizeClassesTest, BinsAndThreadCachesUseTheSameClasses) {
  EXPECT_EQ(BinnedPool::kMaxBinned, SizeClasses::kMaxBytes);
  EXPECT_EQ(BinnedPool::RoundedSize(700), SizeClasses::RoundUp(700));
  EXPECT_EQ(ThreadCache::kMaxBytes, SizeClasses::Bytes(ThreadCache::kClasses - 1));
  for (std::size_t bytes : {1ul, 600ul, 70000ul, 1ul << 20}) {
    EXPECT_EQ(ThreadCache::ClassOf(bytes), SizeClasses::Of(bytes));
  }
}

}  // namespace
}  // namespace ndserve
