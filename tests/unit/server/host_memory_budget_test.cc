#include "server/host_memory_budget.h"

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ndserve {
namespace {

using ::testing::HasSubstr;

class HostMemoryBudgetTest : public ::testing::Test {
 protected:
  prometheus::Registry registry_;
  prometheus::Gauge& gauge_ =
      prometheus::BuildGauge().Name("host_bytes").Register(registry_).Add({});
};

TEST_F(HostMemoryBudgetTest, ShrinkToGivesBackTheRestAndNeverGrows) {
  HostMemoryBudget budget(1000, &gauge_);
  absl::StatusOr<HostMemoryBudget::Reservation> r = budget.Reserve(800, "request and response");
  ASSERT_TRUE(r.ok()) << r.status();
  r->ShrinkTo(300);
  EXPECT_EQ(r->bytes(), 300u);
  EXPECT_EQ(budget.in_use(), 300u);
  EXPECT_EQ(gauge_.Value(), 300);
  r->ShrinkTo(500);  // more than it holds: unchanged
  EXPECT_EQ(budget.in_use(), 300u);
  // What was given back is available to others.
  EXPECT_TRUE(budget.Reserve(700, "another").ok());
  HostMemoryBudget::Reservation empty;
  empty.ShrinkTo(0);
  EXPECT_EQ(empty.bytes(), 0u);
}

TEST_F(HostMemoryBudgetTest, ReservationsMoveTheGaugeAndGiveBackOnDestruction) {
  HostMemoryBudget budget(1000, &gauge_);
  {
    absl::StatusOr<HostMemoryBudget::Reservation> a = budget.Reserve(300, "request a");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(budget.in_use(), 300u);
    EXPECT_EQ(gauge_.Value(), 300);
    ASSERT_TRUE(a->Grow(200, "response a").ok());
    EXPECT_EQ(a->bytes(), 500u);
    EXPECT_EQ(gauge_.Value(), 500);
    HostMemoryBudget::Reservation moved = *std::move(a);
    EXPECT_EQ(budget.in_use(), 500u);
  }
  EXPECT_EQ(budget.in_use(), 0u);
  EXPECT_EQ(gauge_.Value(), 0);
}

TEST_F(HostMemoryBudgetTest, BeyondTheLimitIsResourceExhaustedAndHoldsNothingMore) {
  HostMemoryBudget budget(1000, &gauge_);
  absl::StatusOr<HostMemoryBudget::Reservation> a = budget.Reserve(800, "request a");
  ASSERT_TRUE(a.ok());
  absl::StatusOr<HostMemoryBudget::Reservation> b = budget.Reserve(300, "request b");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(), HasSubstr("request b"));
  EXPECT_THAT(b.status().message(), HasSubstr("--max_inflight_host_bytes"));
  const absl::Status grow = a->Grow(201, "response a");
  EXPECT_EQ(grow.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a->bytes(), 800u);
  EXPECT_EQ(budget.in_use(), 800u);
  EXPECT_EQ(gauge_.Value(), 800);
  // Exactly up to the limit fits.
  EXPECT_TRUE(a->Grow(200, "response a").ok());
  EXPECT_EQ(budget.in_use(), 1000u);
}

TEST_F(HostMemoryBudgetTest, ZeroLimitCountsWithoutLimiting) {
  HostMemoryBudget budget(0, nullptr);
  absl::StatusOr<HostMemoryBudget::Reservation> a = budget.Reserve(uint64_t{1} << 40, "big");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(budget.in_use(), uint64_t{1} << 40);
}

}  // namespace
}  // namespace ndserve
