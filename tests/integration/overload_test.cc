// One client never fails another, through the real daemon: a bad embedding id fails only
// the request that carries it; a model waiting for a batch holds no worker thread, so
// another model answers meanwhile; a full queue is refused with UNAVAILABLE and a request
// whose deadline passed in the queue never runs, both counted in
// ndserve_inference_rejected_total; and past --max_pending_infer calls waiting for a
// worker are refused on the polling thread (engine/dynamic_batcher.h, docs/design.md §5).
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/inference.grpc.pb.h"
#include "tests/integration/integration_support.h"

namespace ndserve::testing {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRecsysRows = 100000;  // tools/gen_models.py RECSYS_ROWS

// A one-row recsys request; `bad_id`, when set, replaces sparse_ids[0][1][3].
inference::ModelInferRequest RecsysRequest(uint64_t seed, std::optional<int64_t> bad_id) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(4 * 8);
  for (int64_t& id : ids) id = static_cast<int64_t>(rng() % kRecsysRows);
  if (bad_id) ids[8 + 3] = *bad_id;
  std::vector<float> dense(13);
  for (float& x : dense) x = static_cast<float>(rng() % 100) / 100.0f;
  inference::ModelInferRequest request;
  request.set_model_name("recsys");
  auto* in = request.add_inputs();
  in->set_name("sparse_ids");
  in->set_datatype("INT64");
  for (int64_t d : {1, 4, 8}) in->add_shape(d);
  request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(ids.data()),
                                             ids.size() * sizeof(int64_t)));
  in = request.add_inputs();
  in->set_name("dense");
  in->set_datatype("FP32");
  for (int64_t d : {1, 13}) in->add_shape(d);
  request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(dense.data()),
                                             dense.size() * sizeof(float)));
  return request;
}

inference::ModelInferRequest MlpRequest(const std::string& model) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  auto* in = request.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(64);
  request.add_raw_input_contents(std::string(64 * sizeof(float), '\0'));
  return request;
}

// A repository in a temporary folder: mlp as "fast" (no batching), "slow" (gathers for
// kSlowDelay), "bounded" (gathers for long, at most two requests waiting); recsys
// gathering for 2 ms, so that concurrent requests merge.
class OverloadDaemonTest : public ::testing::Test {
 protected:
  static constexpr auto kSlowDelay = std::chrono::seconds(4);

  void SetUp() override {
    ASSERT_FALSE(repo_.path().empty());
    const fs::path examples = fs::path(SourceDir()) / "examples/models";
    const fs::path mlp = examples / "mlp/1/model.onnx";
    const std::string io = R"(
input [ { name: "input" data_type: TYPE_FP32 dims: [ 64 ] } ]
output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] } ]
)";
    const std::string slow_us = absl::StrCat(
        std::chrono::duration_cast<std::chrono::microseconds>(kSlowDelay).count());
    repo_.AddModel("fast", mlp, "max_batch_size: 64\n" + io);
    repo_.AddModel("slow", mlp,
                   "max_batch_size: 64\n" + io +
                       "dynamic_batching { max_queue_delay_microseconds: " + slow_us + " }\n");
    repo_.AddModel("bounded", mlp,
                   "max_batch_size: 64\n" + io +
                       "dynamic_batching { max_queue_delay_microseconds: " + slow_us +
                       " default_queue_policy { max_queue_size: 2 } }\n");
    repo_.AddModel("recsys", examples / "recsys/1/model.onnx", R"(max_batch_size: 64
input [ { name: "sparse_ids" data_type: TYPE_INT64 dims: [ 4, 8 ] },
        { name: "dense" data_type: TYPE_FP32 dims: [ 13 ] } ]
output [ { name: "score" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { max_queue_delay_microseconds: 2000 }
)");
    auto d = DaemonProcess::Start({"--model_repository=" + repo_.path().string()});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
  }

  // The daemon stops before the repository it serves is removed.
  void TearDown() override { daemon_.reset(); }

  std::string Metrics() {
    absl::StatusOr<std::string> text = HttpGet(daemon_->metrics_port(), "/metrics");
    EXPECT_TRUE(text.ok()) << text.status();
    return text.value_or("");
  }

  // Waits (up to a minute) until `name{labels}` reads `want`.
  bool AwaitMetric(const std::string& name, const std::string& labels, double want) {
    for (int i = 0; i < 600; ++i) {
      if (MetricValue(Metrics(), name, labels) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  TempModelRepository repo_;  // declared first: destroyed after the daemon
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(OverloadDaemonTest, BadIdsFailOnlyTheirOwnRequests) {
  // A third of the clients send one out-of-range id each; recsys merges concurrent
  // requests into one run.
  const std::unique_ptr<DaemonProcess>& d = daemon_;
  constexpr int kClients = 12, kPerClient = 40;
  std::atomic<int> good_ok{0}, good_failed{0}, bad_right{0}, bad_wrong{0};
  std::string first_problem;
  std::atomic<bool> problem_recorded{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto stub = inference::GRPCInferenceService::NewStub(LoopbackChannel(d->grpc_port()));
      const bool bad = c % 3 == 0;
      const int64_t own_bad_id = kRecsysRows + 1000 + c;
      for (int i = 0; i < kPerClient; ++i) {
        const inference::ModelInferRequest request =
            RecsysRequest(c * 1000 + i, bad ? std::optional<int64_t>(own_bad_id) : std::nullopt);
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        inference::ModelInferResponse response;
        const grpc::Status s = stub->ModelInfer(&context, request, &response);
        if (!bad) {
          if (s.ok()) {
            ++good_ok;
          } else {
            ++good_failed;
            if (!problem_recorded.exchange(true)) first_problem = s.error_message();
          }
          continue;
        }
        // Its own value, and no other client's.
        bool right = s.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
                     s.error_message().find(absl::StrCat(own_bad_id)) != std::string::npos;
        for (int other = 0; other < kClients; other += 3) {
          if (other != c &&
              s.error_message().find(absl::StrCat(kRecsysRows + 1000 + other)) != std::string::npos) {
            right = false;
          }
        }
        if (right) {
          ++bad_right;
        } else {
          ++bad_wrong;
          if (!problem_recorded.exchange(true)) first_problem = s.error_message();
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(good_failed, 0) << first_problem;
  EXPECT_EQ(good_ok, kClients * 2 / 3 * kPerClient);
  EXPECT_EQ(bad_wrong, 0) << first_problem;
  EXPECT_EQ(bad_right, kClients / 3 * kPerClient);
}

TEST_F(OverloadDaemonTest, AModelWaitingForABatchDoesNotDelayAnother) {
  // As many requests to "slow" as the daemon has workers (one per core): before the
  // batcher went asynchronous, each held a worker for the whole delay.
  const int waiting = std::max(2u, std::thread::hardware_concurrency());
  std::atomic<int> slow_done{0}, slow_ok{0};
  std::vector<std::thread> slow_clients;
  for (int i = 0; i < waiting; ++i) {
    slow_clients.emplace_back([&] {
      auto stub = inference::GRPCInferenceService::NewStub(LoopbackChannel(daemon_->grpc_port()));
      grpc::ClientContext context;
      inference::ModelInferResponse response;
      if (stub->ModelInfer(&context, MlpRequest("slow"), &response).ok()) ++slow_ok;
      ++slow_done;
    });
  }
  ASSERT_TRUE(AwaitMetric("ndserve_inference_inflight", R"(model="slow")", waiting));
  auto stub = inference::GRPCInferenceService::NewStub(LoopbackChannel(daemon_->grpc_port()));
  for (int i = 0; i < 5; ++i) {
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    const grpc::Status s = stub->ModelInfer(&context, MlpRequest("fast"), &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(slow_done, 0) << "the fast model answered only after the slow batch ran";
  for (std::thread& t : slow_clients) t.join();
  EXPECT_EQ(slow_ok, waiting);
}

TEST_F(OverloadDaemonTest, AFullQueueIsRefusedAndAnExpiredRequestNeverRuns) {
  std::atomic<int> admitted_ok{0};
  std::vector<std::thread> admitted;
  for (int i = 0; i < 2; ++i) {
    admitted.emplace_back([&] {
      auto stub = inference::GRPCInferenceService::NewStub(LoopbackChannel(daemon_->grpc_port()));
      grpc::ClientContext context;
      inference::ModelInferResponse response;
      if (stub->ModelInfer(&context, MlpRequest("bounded"), &response).ok()) ++admitted_ok;
    });
  }
  ASSERT_TRUE(AwaitMetric("ndserve_inference_inflight", R"(model="bounded")", 2));
  // The inflight gauge counts a request a moment before it is queued.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto stub = inference::GRPCInferenceService::NewStub(LoopbackChannel(daemon_->grpc_port()));
  {
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    const grpc::Status s = stub->ModelInfer(&context, MlpRequest("bounded"), &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
  for (std::thread& t : admitted) t.join();
  EXPECT_EQ(admitted_ok, 2);

  // A client that gives up while its request gathers on "slow": the request is dropped
  // when the batch forms, next to one that still runs.
  std::thread patient([&] {
    auto own = inference::GRPCInferenceService::NewStub(LoopbackChannel(daemon_->grpc_port()));
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    EXPECT_TRUE(own->ModelInfer(&context, MlpRequest("slow"), &response).ok());
  });
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    inference::ModelInferResponse response;
    const grpc::Status s = stub->ModelInfer(&context, MlpRequest("slow"), &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  }
  patient.join();
  // A request that did not run has no resolved version (version=""), as for any failure.
  EXPECT_TRUE(AwaitMetric("ndserve_inference_rejected_total",
                          R"(model="slow",reason="deadline",version="")", 1));
  const std::string text = Metrics();
  EXPECT_EQ(MetricValue(text, "ndserve_inference_rejected_total",
                        R"(model="bounded",reason="queue_full",version="")"),
            1);
  inference::ModelStatisticsRequest stats_request;
  stats_request.set_name("slow");
  inference::ModelStatisticsResponse stats;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->ModelStatistics(&context, stats_request, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).inference_count(), 1u) << "the expired request ran";
}

// --max_pending_infer through the real daemon: one worker (so that the backlog forms on
// any number of cores: it also encodes every batch's responses) and a backlog of one,
// under 16 closed-loop clients. Calls that find a call already waiting for the worker are
// refused at once with UNAVAILABLE, counted as server_busy; all others succeed, and the
// daemon serves normally afterwards.
TEST(MaxPendingInferTest, CallsBeyondTheBacklogAreRefusedAtOnceAndCounted) {
  auto started = DaemonProcess::Start({"--max_pending_infer=1", "--infer_workers=1"});
  ASSERT_TRUE(started.ok()) << started.status();
  const std::unique_ptr<DaemonProcess> d = *std::move(started);
  constexpr int kClients = 16, kPerClient = 60;
  std::atomic<int> ok{0}, shed{0}, other{0};
  std::string other_message;
  std::atomic<bool> other_recorded{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      auto stub = inference::GRPCInferenceService::NewStub(LoopbackChannel(d->grpc_port()));
      for (int i = 0; i < kPerClient; ++i) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        inference::ModelInferResponse response;
        const grpc::Status s = stub->ModelInfer(&context, MlpRequest("mlp"), &response);
        if (s.ok()) {
          ++ok;
        } else if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
                   s.error_message().find("overloaded") != std::string::npos) {
          ++shed;
        } else {
          ++other;
          if (!other_recorded.exchange(true)) other_message = s.error_message();
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(other, 0) << other_message;
  EXPECT_GT(shed, 0) << "no call was refused with a backlog of one";
  EXPECT_GT(ok, 0);
  EXPECT_EQ(ok + shed, kClients * kPerClient);
  absl::StatusOr<std::string> text = HttpGet(d->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(MetricValue(*text, "ndserve_inference_rejected_total",
                        R"(model="mlp",reason="server_busy",version="")"),
            shed.load());
  // Still serving once the load is gone.
  auto stub = d->Inference();
  grpc::ClientContext context;
  inference::ModelInferResponse response;
  const grpc::Status s = stub->ModelInfer(&context, MlpRequest("mlp"), &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  // Every response's host bytes are released once gRPC has sent it (the call object goes
  // a moment after the client has its reply, hence the poll; the limit is a hang guard).
  std::optional<double> held;
  for (int i = 0; i < 600; ++i) {
    absl::StatusOr<std::string> now = HttpGet(d->metrics_port(), "/metrics");
    ASSERT_TRUE(now.ok()) << now.status();
    held = MetricValue(*now, "ndserve_host_request_bytes", "");
    if (held == 0.0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(held, 0.0) << "host bytes still held after every call was answered";
}

}  // namespace
}  // namespace ndserve::testing
