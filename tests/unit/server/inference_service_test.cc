// InferenceServiceImpl through its handlers (no gRPC server): once CutCallsInFlight ran,
// ModelInfer answers UNAVAILABLE naming the exit timeout without running the model, and
// the metrics count the request as failed; a response's host bytes stay in the budget
// until the transport has sent them; the request's "priority" parameter orders a
// model's queue.
#include "server/inference_service.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "engine/engine.h"
#include "engine/served_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "server/health_service.h"
#include "server/metrics_exporter.h"
#include "server/model_lifecycle.h"

namespace ndserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path SourceDir() {
  const char* env = std::getenv("NDSERVE_SOURCE_DIR");
  return env != nullptr ? fs::path(env) : fs::current_path();
}

// The value of the requests counter of `model` with status `code`, -1 if absent.
double RequestCount(const std::string& text, const std::string& model, const std::string& code) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "ndserve_inference_requests_total{") &&
        absl::StrContains(line, absl::StrCat("model=\"", model, "\"")) &&
        absl::StrContains(line, absl::StrCat("code=\"", code, "\""))) {
      return std::stod(std::string(line.substr(line.rfind(' ') + 1)));
    }
  }
  return -1;
}

class InferenceServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() / absl::StrCat("ndserve_inference_service_test_", getpid());
    fs::create_directories(repo_ / "mlp/1");
    const fs::path mlp = SourceDir() / "examples/models/mlp/1/model.onnx";
    ASSERT_TRUE(fs::exists(mlp)) << mlp << " (set NDSERVE_SOURCE_DIR)";
    fs::copy_file(mlp, repo_ / "mlp/1/model.onnx");
    engine_ = std::make_unique<engine::Engine>(
        engine::EngineOptions{.model_repository = repo_.string(), .device = Device::Cpu()},
        &memory_);
    lifecycle_ = std::make_unique<ModelLifecycle>(engine_.get(), &exporter_.inference());
    ASSERT_TRUE(lifecycle_->Load("mlp").ok());
    service_ =
        std::make_unique<InferenceServiceImpl>(engine_.get(), lifecycle_.get(), &health_,
                                               &exporter_.inference(), InferenceServiceOptions{});
    request_.set_model_name("mlp");
    inference::ModelInferRequest::InferInputTensor* input = request_.add_inputs();
    input->set_name("input");
    input->set_datatype("FP32");
    input->add_shape(2);
    input->add_shape(64);
    request_.add_raw_input_contents(std::string(2 * 64 * 4, '\0'));
  }
  void TearDown() override {
    service_.reset();
    if (lifecycle_ != nullptr) lifecycle_->UnloadAll();
    std::error_code ec;
    fs::remove_all(repo_, ec);
  }

  fs::path repo_;
  MemorySystem memory_;
  MetricsExporter exporter_{&memory_.pools()};
  HealthState health_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<ModelLifecycle> lifecycle_;
  std::unique_ptr<InferenceServiceImpl> service_;
  inference::ModelInferRequest request_;
};

TEST_F(InferenceServiceTest, AfterTheCutModelInferAnswersUnavailableAndCountsAFailure) {
  inference::ModelInferResponse response;
  grpc::Status s = service_->ModelInfer(request_, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // Not started on a server: no call was accepted, so none is unanswered.
  EXPECT_TRUE(service_->AwaitCallsAnswered(absl::Now()));
  EXPECT_EQ(service_->CutCallsInFlight(), 0);

  inference::ModelInferResponse cut;
  s = service_->ModelInfer(request_, &cut);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("exit timeout"));
  EXPECT_EQ(cut.outputs_size(), 0);

  const std::string text = exporter_.Text();
  EXPECT_EQ(RequestCount(text, "mlp", "OK"), 1) << text;
  EXPECT_EQ(RequestCount(text, "mlp", "UNAVAILABLE"), 1) << text;
  // The cut request never reached the model.
  absl::StatusOr<std::vector<engine::ModelStatsSnapshot>> stats = engine_->GetStatistics("mlp");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].success_count + (*stats)[0].fail_count, 1u);
}

TEST_F(InferenceServiceTest, AResponseStaysInTheHostBudgetUntilItIsSent) {
  // A slow reader: the reply is handed over, but the transport has not sent it yet.
  inference::ModelInferResponse response;
  grpc::Status status;
  HostMemoryBudget::Reservation until_sent;
  absl::Notification answered;
  service_->ModelInferAsync(request_, &response, absl::InfiniteFuture(),
                            InferenceServiceImpl::HeldReply(
                                [&](grpc::Status s, HostMemoryBudget::Reservation held) {
                                  status = std::move(s);
                                  until_sent = std::move(held);
                                  answered.Notify();
                                }));
  answered.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.raw_output_contents_size(), 1);
  const size_t output_bytes = response.raw_output_contents(0).size();
  EXPECT_EQ(output_bytes, 2u * 10 * sizeof(float));
  EXPECT_GE(service_->host_bytes_in_use(), output_bytes);
  EXPECT_EQ(service_->host_bytes_in_use(), until_sent.bytes());
  { HostMemoryBudget::Reservation sent = std::move(until_sent); }
  EXPECT_EQ(service_->host_bytes_in_use(), 0u);
}

TEST_F(InferenceServiceTest, TheUnheldReplyReleasesTheHostBytesBeforeAnswering) {
  inference::ModelInferResponse response;
  uint64_t in_use_at_reply = 1;
  absl::Notification answered;
  service_->ModelInferAsync(request_, &response, absl::InfiniteFuture(),
                            InferenceServiceImpl::Reply([&](grpc::Status s) {
                              EXPECT_TRUE(s.ok()) << s.error_message();
                              in_use_at_reply = service_->host_bytes_in_use();
                              answered.Notify();
                            }));
  answered.WaitForNotification();
  EXPECT_EQ(in_use_at_reply, 0u);
}

// A one-row mlp request for `model` at `priority` (none when 0).
inference::ModelInferRequest OneRow(const std::string& model, uint64_t priority) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  inference::ModelInferRequest::InferInputTensor* input = request.add_inputs();
  input->set_name("input");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(64);
  request.add_raw_input_contents(std::string(64 * 4, '\0'));
  if (priority > 0) (*request.mutable_parameters())["priority"].set_uint64_param(priority);
  return request;
}

TEST_F(InferenceServiceTest, AHigherPriorityParameterIsServedBeforeQueuedLowerOnes) {
  // The mlp with Triton's priority levels 1..3 (default 2) and one-row batches, so that
  // requests queue one by one behind its single predictor.
  const fs::path dir = repo_ / "mlp_priority";
  fs::create_directories(dir / "1");
  fs::copy_file(repo_ / "mlp/1/model.onnx", dir / "1/model.onnx");
  std::ofstream(dir / "config.pbtxt") << R"pb(
    name: "mlp_priority"
    platform: "onnxruntime_onnx"
    max_batch_size: 1
    input [ { name: "input" data_type: TYPE_FP32 dims: [ 64 ] } ]
    output [ { name: "probabilities" data_type: TYPE_FP32 dims: [ 10 ] } ]
    instance_group [ { count: 1 kind: KIND_CPU } ]
    dynamic_batching { priority_levels: 3 default_priority_level: 2 }
  )pb";
  ASSERT_TRUE(lifecycle_->Load("mlp_priority").ok());

  // The holder's request blocks inside its run (the batcher's test hook), which keeps the
  // only predictor busy until released. Shared with the hook, which the model keeps.
  struct Gate {
    absl::Notification entered, released;
  };
  auto gate = std::make_shared<Gate>();
  absl::StatusOr<std::shared_ptr<engine::ServedModel>> model = engine_->GetModel("mlp_priority");
  ASSERT_TRUE(model.ok()) << model.status();
  (*model)->SetBeforeRunForTesting([gate](const engine::InferenceRequest& r) {
    if (r.id != "hold") return;
    gate->entered.Notify();
    gate->released.WaitForNotification();
  });
  inference::ModelInferRequest hold = OneRow("mlp_priority", 0);
  hold.set_id("hold");
  inference::ModelInferResponse hold_response;
  std::thread holder([&] {
    service_->ModelInferAsync(hold, &hold_response, absl::InfiniteFuture(),
                              InferenceServiceImpl::Reply([](grpc::Status s) {
                                EXPECT_TRUE(s.ok()) << s.error_message();
                              }));
  });
  gate->entered.WaitForNotification();

  // Shared with the callbacks, which may still be unwinding on the lane thread when the
  // test has seen the last answer.
  struct Answers {
    absl::Mutex mu;
    std::vector<std::string> order ABSL_GUARDED_BY(mu);
  };
  auto answers = std::make_shared<Answers>();
  const std::vector<std::pair<std::string, uint64_t>> sent = {{"low", 3}, {"plain", 0}, {"high", 1}};
  std::vector<inference::ModelInferRequest> requests;
  for (const auto& [name, priority] : sent) requests.push_back(OneRow("mlp_priority", priority));
  std::vector<inference::ModelInferResponse> responses(sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    // Queued when this returns: the only predictor is busy.
    service_->ModelInferAsync(
        requests[i], &responses[i], absl::InfiniteFuture(),
        InferenceServiceImpl::Reply([answers, name = sent[i].first](grpc::Status s) {
          EXPECT_TRUE(s.ok()) << name << ": " << s.error_message();
          absl::MutexLock lock(&answers->mu);
          answers->order.push_back(name);
        }));
  }
  {
    absl::MutexLock lock(&answers->mu);
    EXPECT_TRUE(answers->order.empty()) << "a request ran while the predictor was busy";
  }
  gate->released.Notify();
  holder.join();
  absl::MutexLock lock(&answers->mu);
  answers->mu.Await(absl::Condition(
      +[](std::vector<std::string>* order) { return order->size() == 3; }, &answers->order));
  EXPECT_EQ(answers->order, (std::vector<std::string>{"high", "plain", "low"}));
}

TEST_F(InferenceServiceTest, ThePriorityParameterMustBeANonNegativeInteger) {
  inference::ModelInferResponse response;
  (*request_.mutable_parameters())["priority"].set_uint64_param(1);
  EXPECT_TRUE(service_->ModelInfer(request_, &response).ok());
  (*request_.mutable_parameters())["priority"].set_int64_param(2);
  EXPECT_TRUE(service_->ModelInfer(request_, &response).ok());
  for (auto set : std::vector<std::function<void(inference::InferParameter&)>>{
           [](inference::InferParameter& p) { p.set_int64_param(-1); },
           [](inference::InferParameter& p) { p.set_string_param("high"); }}) {
    set((*request_.mutable_parameters())["priority"]);
    const grpc::Status s = service_->ModelInfer(request_, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("parameter 'priority'"));
  }
}

}  // namespace
}  // namespace ndserve
