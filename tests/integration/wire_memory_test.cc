// The wire memory test: many ModelInfer calls from concurrent clients against the real
// daemon, then the pools must hold exactly what they held after warm-up (every request's
// PredictorContext gave its blocks back) and the model and predictor managers must own
// exactly the resources they owned before (nothing attached to them during a request).
//
// Requests default to 20,000 from 8 clients (NDSERVE_WIRE_REQUESTS / NDSERVE_WIRE_CLIENTS
// override); three in four go to mlp, one in four to recsys, and every response is checked
// against the numpy reference.
#include <grpcpp/client_context.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/integration_support.h"

namespace ndserve::testing {
namespace {

int EnvInt(const char* name, int fallback) {
  int v;
  const char* text = std::getenv(name);
  return text != nullptr && absl::SimpleAtoi(text, &v) && v > 0 ? v : fallback;
}

bool CloseTo(const std::string& got, const CaseTensor& want, const ReferenceCase& c) {
  if (got.size() != want.bytes.size()) return false;
  const size_t n = got.size() / 4;
  for (size_t k = 0; k < n; ++k) {
    float g, w;
    std::memcpy(&g, got.data() + 4 * k, 4);
    std::memcpy(&w, want.bytes.data() + 4 * k, 4);
    if (!(std::fabs(g - w) <= c.atol + c.rtol * std::fabs(w))) return false;
  }
  return true;
}

struct Totals {
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::atomic<int> wrong{0};
  std::string first_error;
};

// `total` requests spread over `clients` threads, each with its own channel.
void RunClients(const DaemonProcess& daemon, int total, int clients, const ReferenceCase& mlp,
                const ReferenceCase& recsys, Totals* totals) {
  const inference::ModelInferRequest mlp_request = RequestFor("mlp", mlp);
  const inference::ModelInferRequest recsys_request = RequestFor("recsys", recsys);
  std::atomic<int> next{0};
  std::atomic<bool> error_recorded{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&] {
      auto stub = inference::GRPCInferenceService::NewStub(LoopbackChannel(daemon.grpc_port()));
      for (int i = next++; i < total; i = next++) {
        const bool use_recsys = i % 4 == 3;
        const ReferenceCase& c = use_recsys ? recsys : mlp;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        inference::ModelInferResponse response;
        grpc::Status s =
            stub->ModelInfer(&context, use_recsys ? recsys_request : mlp_request, &response);
        if (!s.ok()) {
          ++totals->failed;
          if (!error_recorded.exchange(true)) totals->first_error = s.error_message();
          continue;
        }
        ++totals->ok;
        if (response.raw_output_contents_size() != 1 ||
            !CloseTo(response.raw_output_contents(0), c.outputs[0], c)) {
          ++totals->wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

struct Snapshot {
  uint64_t allocated = 0;
  double model_resources = 0;
  double predictor_resources = 0;
  double context_live = 0;
};

Snapshot Read(const DaemonProcess& daemon) {
  Snapshot s;
  auto admin = daemon.Admin();
  absl::StatusOr<uint64_t> allocated = AllocatedBytes(*admin);
  EXPECT_TRUE(allocated.ok()) << allocated.status();
  s.allocated = allocated.value_or(0);
  absl::StatusOr<std::string> metrics = HttpGet(daemon.metrics_port(), "/metrics");
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  const std::string text = metrics.value_or("");
  const auto model = MetricValue(text, "ndserve_manager_resources", R"(level="model")");
  const auto predictor = MetricValue(text, "ndserve_manager_resources", R"(level="predictor")");
  EXPECT_TRUE(model.has_value() && predictor.has_value()) << text.substr(0, 4000);
  s.model_resources = model.value_or(-1);
  s.predictor_resources = predictor.value_or(-1);
  s.context_live = MetricValue(text, "ndserve_manager_live", R"(level="context")").value_or(0);
  return s;
}

TEST(WireMemoryTest, ManyConcurrentRequestsLeaveNothingBehind) {
  const int requests = EnvInt("NDSERVE_WIRE_REQUESTS", 20000);
  const int clients = EnvInt("NDSERVE_WIRE_CLIENTS", 8);
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start();
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<ReferenceCase> mlp = ReadReferenceCase("mlp");
  absl::StatusOr<ReferenceCase> recsys = ReadReferenceCase("recsys");
  ASSERT_TRUE(mlp.ok() && recsys.ok());

  // Warm-up: every predictor has run, the pools have the blocks a request needs cached.
  Totals warm;
  RunClients(**d, 400, clients, *mlp, *recsys, &warm);
  ASSERT_EQ(warm.failed, 0) << warm.first_error;
  const Snapshot before = Read(**d);

  Totals totals;
  const auto start = std::chrono::steady_clock::now();
  RunClients(**d, requests, clients, *mlp, *recsys, &totals);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Snapshot after = Read(**d);

  std::cout << "wire memory test: " << totals.ok << " ok / " << requests << " requests from "
            << clients << " clients in " << seconds << " s (" << totals.ok / seconds
            << " req/s); pool allocated bytes " << before.allocated << " -> " << after.allocated
            << "; manager resources model " << before.model_resources << " -> "
            << after.model_resources << ", predictor " << before.predictor_resources << " -> "
            << after.predictor_resources << "; live contexts " << after.context_live << std::endl;
  ::testing::Test::RecordProperty("requests_per_second", static_cast<int>(totals.ok / seconds));
  ::testing::Test::RecordProperty("allocated_after_warmup", absl::StrCat(before.allocated));
  ::testing::Test::RecordProperty("allocated_after_load", absl::StrCat(after.allocated));

  EXPECT_EQ(totals.failed, 0) << totals.first_error;
  EXPECT_EQ(totals.wrong, 0) << "responses that differ from the reference";
  EXPECT_EQ(totals.ok, requests);
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(after.model_resources, before.model_resources);
  EXPECT_EQ(after.predictor_resources, before.predictor_resources);
  EXPECT_EQ(after.context_live, 0);

  absl::StatusOr<std::string> metrics = HttpGet((*d)->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok());
  const double served = MetricValue(*metrics, "ndserve_inference_requests_total",
                                    R"(code="OK",model="mlp",version="1")")
                            .value_or(-1) +
                        MetricValue(*metrics, "ndserve_inference_requests_total",
                                    R"(code="OK",model="recsys",version="1")")
                            .value_or(-1);
  EXPECT_EQ(served, requests + 400) << "ndserve_inference_requests_total{code=\"OK\"}";
}

}  // namespace
}  // namespace ndserve::testing
