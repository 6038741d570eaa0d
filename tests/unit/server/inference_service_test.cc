// InferenceServiceImpl's shutdown cut, through its handlers (no gRPC server): once
// CutCallsInFlight ran, ModelInfer answers UNAVAILABLE naming the exit timeout without
// running the model, and the metrics count the request as failed.
#include "server/inference_service.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/engine.h"
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

}  // namespace
}  // namespace ndserve
