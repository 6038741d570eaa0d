// LeakTracker alone, level by level (leak_tracking_test.cc shows it through a pool's
// memory status).
#include "memory/leak_tracker.h"

#include <string>

#include "gtest/gtest.h"

namespace ndserve {
namespace {

const void* Address(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(LeakTrackerTest, Level0RecordsNothing) {
  LeakTracker leaks(0);
  EXPECT_EQ(leaks.level(), 0);
  leaks.Record(Address(0x1000), 512, "m");
  EXPECT_TRUE(leaks.List().empty());
  leaks.Erase(Address(0x1000));  // harmless
}

TEST(LeakTrackerTest, Level1ListsLiveBlocksByAddressWithOwnersAndNoStacks) {
  LeakTracker leaks(1);
  leaks.Record(Address(0x3000), 300, "predictor/1");
  leaks.Record(Address(0x1000), 100, "");
  leaks.Record(Address(0x2000), 200, "model/a");
  leaks.Record(nullptr, 50, "ignored");
  leaks.Erase(Address(0x2000));
  std::vector<OutstandingAllocation> live = leaks.List();
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].address, 0x1000u);
  EXPECT_EQ(live[0].bytes, 100u);
  EXPECT_EQ(live[0].owner, "");
  EXPECT_EQ(live[1].address, 0x3000u);
  EXPECT_EQ(live[1].owner, "predictor/1");
  for (const OutstandingAllocation& a : live) EXPECT_TRUE(a.stack_trace.empty());
  leaks.Erase(Address(0x1000));
  leaks.Erase(Address(0x3000));
  EXPECT_TRUE(leaks.List().empty());
}

TEST(LeakTrackerTest, Level2AddsASymbolizedStack) {
  LeakTracker leaks(2);
  leaks.Record(Address(0x4000), 4096, "ctx/7");
  std::vector<OutstandingAllocation> live = leaks.List();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].owner, "ctx/7");
  // One line per frame, each numbered ("  #0 0x... name").
  EXPECT_NE(live[0].stack_trace.find("#0 "), std::string::npos) << live[0].stack_trace;
  // A block recorded again at the same address (reused after a free that was never
  // seen) replaces the old entry.
  leaks.Record(Address(0x4000), 512, "ctx/8");
  live = leaks.List();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].bytes, 512u);
  EXPECT_EQ(live[0].owner, "ctx/8");
}

}  // namespace
}  // namespace ndserve
