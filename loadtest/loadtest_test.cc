// Tests of the load generator's parts, and of whole runs against an in-process
// GRPCInferenceService whose behavior (failures, malformed responses) the test controls.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "loadtest/latency_histogram.h"
#include "loadtest/load_driver.h"
#include "loadtest/memory_probe.h"
#include "loadtest/tensor_spec.h"
#include "proto/inference.grpc.pb.h"

namespace ndserve::loadtest {
namespace {

TEST(LatencyHistogramTest, PercentilesWithinBucketPrecision) {
  LatencyHistogram h;
  for (std::int64_t v = 1; v <= 100000; ++v) h.Record(v * 1000);
  EXPECT_EQ(h.count(), 100000);
  EXPECT_EQ(h.min(), 1000);
  EXPECT_EQ(h.max(), 100000 * 1000);
  EXPECT_NEAR(h.mean(), 50000.5 * 1000, 1);
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double exact = q * 100000 * 1000;
    EXPECT_NEAR(h.Percentile(q), exact, exact * 0.008) << "q=" << q;
  }
  EXPECT_EQ(h.Percentile(1.0), h.max());
}

TEST(LatencyHistogramTest, MergeMatchesRecordingEverything) {
  LatencyHistogram a, b, all;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const auto v = static_cast<std::int64_t>(rng() % 50'000'000);
    (i % 2 ? a : b).Record(v);
    all.Record(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_EQ(a.Percentile(0.99), all.Percentile(0.99));
  LatencyHistogram empty;
  EXPECT_EQ(empty.Percentile(0.5), 0);
}

TEST(TensorSpecTest, ParsesAndResolvesTheBatchDimension) {
  absl::StatusOr<TensorSpec> spec = ParseTensorSpec("sparse_ids:INT64:-1x4x8");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "sparse_ids");
  EXPECT_EQ(spec->datatype, "INT64");
  EXPECT_EQ(spec->shape, (std::vector<std::int64_t>{-1, 4, 8}));
  absl::StatusOr<TensorSpec> resolved = ResolveShape(*spec, 16, 1);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->shape, (std::vector<std::int64_t>{16, 4, 8}));
  EXPECT_EQ(ResolveShape({"x", "FP32", {2, -1}}, 16, 5)->shape, (std::vector<std::int64_t>{2, 5}));
}

TEST(TensorSpecTest, RejectsMalformedSpecs) {
  for (const char* bad :
       {"x:FP32", "x:FLOAT:4", "x:FP32:4x0", "x:FP32:4xq", ":FP32:4", "x:FP32:"}) {
    EXPECT_FALSE(ParseTensorSpec(bad).ok()) << bad;
  }
}

TEST(TensorSpecTest, RandomBytesHaveTheWireSizeAndRange) {
  std::mt19937_64 rng(1);
  RandomOptions options;
  options.int_max = 10;
  absl::StatusOr<std::string> fp32 = RandomTensorBytes({"x", "FP32", {2, 3}}, options, rng);
  ASSERT_TRUE(fp32.ok());
  EXPECT_EQ(fp32->size(), 24u);
  absl::StatusOr<std::string> ids = RandomTensorBytes({"ids", "INT64", {100}}, options, rng);
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 800u);
  for (int i = 0; i < 100; ++i) {
    std::int64_t v = 0;
    std::memcpy(&v, ids->data() + 8 * i, 8);
    EXPECT_GE(v, 0);
    EXPECT_LT(v, 10);
  }
  options.bytes_length = 5;
  absl::StatusOr<std::string> bytes = RandomTensorBytes({"s", "BYTES", {3}}, options, rng);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->size(), 3u * (4 + 5));
  EXPECT_EQ(RandomTensorBytes({"h", "FP16", {4}}, options, rng)->size(), 8u);
}

TEST(MemoryProbeTest, ParsesPoolsAndRssFromMetricsText) {
  const std::string text =
      "# HELP ndserve_memory_allocated_bytes Bytes in live blocks.\n"
      "# TYPE ndserve_memory_allocated_bytes gauge\n"
      "ndserve_memory_allocated_bytes{device=\"cuda:0\",pool=\"binned\"} 4096\n"
      "ndserve_memory_allocated_bytes{device=\"cpu:0\",pool=\"binned\"} 512 1700000000000\n"
      "ndserve_memory_cached_bytes{device=\"cuda:0\",pool=\"binned\"} 1.048576e+06\n"
      "ndserve_memory_reserved_bytes{device=\"cuda:0\",pool=\"binned\"} 1052672\n"
      "ndserve_memory_outstanding_allocations{device=\"cuda:0\",pool=\"binned\"} 3\n"
      "ndserve_memory_limit_bytes{device=\"cuda:0\"} 8e9\n"
      "process_resident_memory_bytes 123456789\n";
  const MemorySnapshot m = ParseMetricsText(text);
  ASSERT_EQ(m.pools.size(), 2u);
  EXPECT_EQ(m.allocated_bytes(), 4096u + 512u);
  EXPECT_EQ(m.cached_bytes(), 1048576u);
  EXPECT_EQ(m.reserved_bytes(), 1052672u);
  ASSERT_TRUE(m.rss_bytes.has_value());
  EXPECT_EQ(*m.rss_bytes, 123456789u);
  for (const PoolMemory& p : m.pools) {
    if (p.device == "cuda:0") EXPECT_EQ(p.outstanding_allocations, 3u);
  }
}

// Echoes inputs like ndserve-echo; every `fail_every`th call fails with
// RESOURCE_EXHAUSTED and, with `drop_outputs`, responses carry no outputs.
class FakeInferenceService final : public inference::GRPCInferenceService::Service {
 public:
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override {
    const int inflight = inflight_.fetch_add(1) + 1;
    int seen = max_inflight_.load();
    while (inflight > seen && !max_inflight_.compare_exchange_weak(seen, inflight)) {
    }
    const std::int64_t n = calls_.fetch_add(1) + 1;
    if (hold_until_calls > 0) {
      absl::MutexLock lock(&hold_mu_);
      hold_mu_.Await(absl::Condition(
          +[](FakeInferenceService* s) { return s->calls_.load() >= s->hold_until_calls; }, this));
    }
    grpc::Status status = grpc::Status::OK;
    if (fail_every > 0 && n % fail_every == 0) {
      status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "out of memory");
    } else if (!drop_outputs) {
      response->set_model_name(request->model_name());
      for (const auto& input : request->inputs()) {
        auto* out = response->add_outputs();
        out->set_name(input.name());
        out->set_datatype(input.datatype());
        *out->mutable_shape() = input.shape();
      }
      *response->mutable_raw_output_contents() = request->raw_input_contents();
    }
    inflight_.fetch_sub(1);
    return status;
  }

  int inflight() const { return inflight_.load(); }
  int max_inflight() const { return max_inflight_.load(); }
  std::int64_t calls() const { return calls_.load(); }

  std::int64_t fail_every = 0;
  bool drop_outputs = false;
  // > 0: no call is answered before this many have arrived.
  std::int64_t hold_until_calls = 0;

 private:
  absl::Mutex hold_mu_;
  std::atomic<int> inflight_{0};
  std::atomic<int> max_inflight_{0};
  std::atomic<std::int64_t> calls_{0};
};

class RunLoadTest : public testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(port, 0);
    options_.address = "127.0.0.1:" + std::to_string(port);
    inference::ModelInferRequest request;
    request.set_model_name("mlp");
    auto* input = request.add_inputs();
    input->set_name("input");
    input->set_datatype("FP32");
    input->add_shape(1);
    input->add_shape(4);
    request.add_raw_input_contents(std::string(16, '\0'));
    options_.requests = {request.SerializeAsString()};
    options_.threads = 2;
    options_.channels = 2;
    options_.validate_every = 1;
  }
  void TearDown() override { server_->Shutdown(); }

  FakeInferenceService service_;
  std::unique_ptr<grpc::Server> server_;
  LoadOptions options_;
};

TEST_F(RunLoadTest, ClosedLoopSendsExactlyTheRequestCountAndCountsErrorsByCode) {
  service_.fail_every = 10;
  options_.concurrency = 8;
  options_.max_requests = 500;
  absl::StatusOr<LoadResult> result = RunLoad(options_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sent, 500);
  EXPECT_EQ(service_.calls(), 500);
  EXPECT_EQ(result->ok, 450);
  EXPECT_EQ(result->error_count(), 50);
  EXPECT_EQ(result->errors.at("RESOURCE_EXHAUSTED"), 50);
  EXPECT_EQ(result->latency.count(), 450);
  EXPECT_EQ(result->error_latency.count(), 50);
  EXPECT_LE(service_.max_inflight(), 8);
  EXPECT_GT(result->elapsed, absl::ZeroDuration());
}

TEST_F(RunLoadTest, PausesAreQuiescentAndEvenlySpaced) {
  options_.concurrency = 6;
  options_.max_requests = 1000;
  options_.pause_every = 250;
  std::vector<std::int64_t> pauses;
  std::vector<int> inflight_at_pause;
  options_.on_pause = [&](std::int64_t completed) {
    pauses.push_back(completed);
    inflight_at_pause.push_back(service_.inflight());
  };
  absl::StatusOr<LoadResult> result = RunLoad(options_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sent, 1000);
  EXPECT_EQ(result->ok, 1000);
  EXPECT_EQ(pauses, (std::vector<std::int64_t>{250, 500, 750}));
  EXPECT_EQ(inflight_at_pause, (std::vector<int>{0, 0, 0}));
}

TEST_F(RunLoadTest, OpenLoopFollowsTheRate) {
  options_.rate = 2000;
  options_.duration = absl::Milliseconds(500);
  absl::StatusOr<LoadResult> result = RunLoad(options_);
  ASSERT_TRUE(result.ok()) << result.status();
  // 1000 scheduled; a loaded CI machine may run a little late, never ahead.
  EXPECT_LE(result->sent + result->not_sent, 1001);
  EXPECT_GE(result->sent, 800);
  EXPECT_EQ(result->ok, result->sent);
}

// Open loop means the schedule never waits for a reply: here no reply comes before 40
// requests have arrived, which a client that waited for replies (or had fewer slots)
// would never send.
TEST_F(RunLoadTest, OpenLoopDoesNotWaitForReplies) {
  service_.hold_until_calls = 40;
  options_.rate = 2000;
  options_.max_requests = 40;
  options_.duration = absl::Seconds(30);
  options_.max_outstanding = 64;
  absl::StatusOr<LoadResult> result = RunLoad(options_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sent, 40);
  EXPECT_EQ(result->ok, 40) << "requests sent only after a reply timed out";
  EXPECT_EQ(service_.max_inflight(), 40);
}

TEST_F(RunLoadTest, ResponsesWithoutOutputsAreInvalid) {
  service_.drop_outputs = true;
  options_.concurrency = 2;
  options_.max_requests = 20;
  absl::StatusOr<LoadResult> result = RunLoad(options_);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->ok, 0);
  EXPECT_EQ(result->errors.at("INVALID_RESPONSE"), 20);
}

TEST(RunLoadErrorsTest, UnreachableAddressFails) {
  LoadOptions options;
  options.address = "127.0.0.1:1";
  options.requests = {""};
  options.max_requests = 1;
  options.connect_timeout = absl::Milliseconds(300);
  EXPECT_FALSE(RunLoad(options).ok());
  options.max_requests = 0;
  EXPECT_FALSE(RunLoad(options).ok());
}

}  // namespace
}  // namespace ndserve::loadtest
