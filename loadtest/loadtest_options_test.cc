// PlanLoadtest: the one place ndserve-loadtest turns its flags into a run.
#include "loadtest/loadtest_options.h"

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace ndserve::loadtest {
namespace {

LoadtestOptions WithModel() {
  LoadtestOptions o;
  o.model = "mlp";
  return o;
}

TEST(PlanLoadtestTest, DefaultsRunTenSecondsClosedLoopAgainstLocalSources) {
  absl::StatusOr<LoadtestPlan> plan = PlanLoadtest(WithModel(), 16);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->duration_s, 10);
  EXPECT_EQ(plan->max_requests, 0);
  EXPECT_EQ(plan->sample_every, 0);
  EXPECT_TRUE(plan->inputs.empty());
  // Closed loop with concurrency 1: one thread is enough, one channel per thread.
  EXPECT_EQ(plan->threads, 1);
  EXPECT_EQ(plan->channels, 1);
  EXPECT_EQ(plan->admin_address, "127.0.0.1:8003");
  EXPECT_TRUE(plan->admin_auto);
  EXPECT_EQ(plan->metrics_address, "127.0.0.1:8002");
  EXPECT_TRUE(plan->metrics_auto);
}

TEST(PlanLoadtestTest, RequestsAloneMeanNoTimeLimit) {
  LoadtestOptions o = WithModel();
  o.requests = 500;
  absl::StatusOr<LoadtestPlan> plan = PlanLoadtest(o, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_requests, 500);
  EXPECT_EQ(plan->duration_s, 0);
}

TEST(PlanLoadtestTest, SoakSendsAMillionAndSamplesUnlessTold) {
  LoadtestOptions o = WithModel();
  o.soak = true;
  absl::StatusOr<LoadtestPlan> plan = PlanLoadtest(o, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_requests, 1'000'000);
  EXPECT_EQ(plan->duration_s, 0);
  EXPECT_EQ(plan->sample_every, 10'000);

  o.requests = 2000;
  o.sample_every = 100;
  plan = PlanLoadtest(o, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_requests, 2000);
  EXPECT_EQ(plan->sample_every, 100);

  o.requests = 0;
  o.duration_s = 30;
  plan = PlanLoadtest(o, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->max_requests, 0);
  EXPECT_EQ(plan->duration_s, 30);
}

TEST(PlanLoadtestTest, ThreadsAndChannels) {
  LoadtestOptions o = WithModel();
  o.concurrency = 64;
  absl::StatusOr<LoadtestPlan> plan = PlanLoadtest(o, 16);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->threads, 4);  // min(4, CPUs)
  EXPECT_EQ(plan->channels, 4);

  plan = PlanLoadtest(o, 0);  // unknown CPU count
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->threads, 1);

  o.threads = 8;
  o.channels = 32;
  plan = PlanLoadtest(o, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->threads, 8);
  EXPECT_EQ(plan->channels, 32);

  // Open loop: the thread count does not depend on --concurrency.
  o.concurrency = 1;
  o.rate = 1000;
  o.channels = 0;
  plan = PlanLoadtest(o, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->threads, 8);
  EXPECT_EQ(plan->channels, 8);
}

TEST(PlanLoadtestTest, AutoMemorySourcesFollowTheAddress) {
  LoadtestOptions o = WithModel();
  o.address = "10.1.2.3:8001";
  absl::StatusOr<LoadtestPlan> plan = PlanLoadtest(o, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The admin listener is loopback-only by default: not tried on a remote host.
  EXPECT_EQ(plan->admin_address, "");
  EXPECT_EQ(plan->metrics_address, "10.1.2.3:8002");

  o.address = "[::1]:9001";
  plan = PlanLoadtest(o, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->admin_address, "[::1]:8003");

  o.admin_address = "127.0.0.1:7003";
  o.metrics_address = "";
  plan = PlanLoadtest(o, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->admin_address, "127.0.0.1:7003");
  EXPECT_FALSE(plan->admin_auto);
  EXPECT_EQ(plan->metrics_address, "");
  EXPECT_FALSE(plan->metrics_auto);
}

TEST(PlanLoadtestTest, ParsesInputs) {
  LoadtestOptions o = WithModel();
  o.input = {"input:FP32:-1x64", "ids:INT64:-1x4x8"};
  absl::StatusOr<LoadtestPlan> plan = PlanLoadtest(o, 4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->inputs.size(), 2u);
  EXPECT_EQ(plan->inputs[0].name, "input");
  EXPECT_EQ(plan->inputs[0].datatype, "FP32");
  EXPECT_EQ(plan->inputs[0].shape, (std::vector<std::int64_t>{-1, 64}));
  EXPECT_EQ(plan->inputs[1].name, "ids");
  EXPECT_EQ(plan->inputs[1].shape, (std::vector<std::int64_t>{-1, 4, 8}));
}

TEST(PlanLoadtestTest, BadOptionsNameTheFlag) {
  LoadtestOptions o;
  absl::StatusOr<LoadtestPlan> plan = PlanLoadtest(o, 4);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("--model"), std::string::npos);

  for (auto bad :
       {+[](LoadtestOptions& x) { x.batch = 0; }, +[](LoadtestOptions& x) { x.concurrency = 0; },
        +[](LoadtestOptions& x) { x.rate = -1; }}) {
    o = WithModel();
    bad(o);
    plan = PlanLoadtest(o, 4);
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find("--batch and --concurrency"), std::string::npos);
  }

  o = WithModel();
  o.input = {"input:NOPE:-1x64"};
  plan = PlanLoadtest(o, 4);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("--input"), std::string::npos);
}

TEST(PlanLoadtestTest, HttpProtocolTakesAKnownFormatAndNoSoak) {
  LoadtestOptions o = WithModel();
  o.protocol = "http";
  o.http_format = "json";
  EXPECT_TRUE(PlanLoadtest(o, 4).ok());
  o.http_format = "xml";
  EXPECT_EQ(PlanLoadtest(o, 4).status().code(), absl::StatusCode::kInvalidArgument);
  o.http_format = "binary";
  o.rate = 100;  // an open loop over --concurrency connections
  EXPECT_TRUE(PlanLoadtest(o, 4).ok());
  o.rate = 0;
  o.soak = true;
  EXPECT_EQ(PlanLoadtest(o, 4).status().code(), absl::StatusCode::kInvalidArgument);
  o = WithModel();
  o.protocol = "quic";
  EXPECT_EQ(PlanLoadtest(o, 4).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ndserve::loadtest
