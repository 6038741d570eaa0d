// The real `ndserved` under requests and configs that try to make it allocate without
// bound or echo hostile text: names past the limit, repeated outputs, oversized requests
// and responses, the host-memory budget, a config.pbtxt that is not UTF-8, out-of-range
// instance counts and token files that are not small regular files (README "Failure
// behaviour"). After each refusal the daemon keeps serving.
#include <grpcpp/client_context.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/integration_support.h"

namespace ndserve::testing {
namespace {

namespace fs = std::filesystem;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using ::testing::HasSubstr;
using Stub = inference::GRPCInferenceService::Stub;

std::unique_ptr<grpc::ClientContext> Context(int seconds = 30) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

// An mlp request of `batch` rows of zeros (input FP32[batch,64]).
ModelInferRequest MlpRequest(int batch) {
  ModelInferRequest r;
  r.set_model_name("mlp");
  auto* in = r.add_inputs();
  in->set_name("input");
  in->set_datatype("FP32");
  in->add_shape(batch);
  in->add_shape(64);
  r.add_raw_input_contents(std::string(static_cast<size_t>(batch) * 64 * 4, '\0'));
  return r;
}

grpc::Status Infer(Stub& stub, const ModelInferRequest& request) {
  ModelInferResponse response;
  return stub.ModelInfer(Context().get(), request, &response);
}

void ExpectServes(Stub& stub) {
  const grpc::Status s = Infer(stub, MlpRequest(1));
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// The longest line the daemon logged.
size_t LongestLogLine(const std::string& log) {
  size_t longest = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) longest = std::max(longest, line.size());
  return longest;
}

// A model repository in a fresh temporary directory, removed at the end.
class TempRepository {
 public:
  TempRepository() {
    std::string tmpl = (fs::temp_directory_path() / "ndserve_bounds_XXXXXX").string();
    root_ = mkdtemp(tmpl.data());
  }
  ~TempRepository() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  // <root>/<name>/1/model.onnx is the mlp example; config.pbtxt holds `config` if given.
  void AddMlpCopy(const std::string& name, const std::string& config = "") {
    fs::create_directories(root_ / name / "1");
    fs::copy_file(fs::path(SourceDir()) / "examples/models/mlp/1/model.onnx",
                  root_ / name / "1/model.onnx");
    if (!config.empty()) std::ofstream(root_ / name / "config.pbtxt", std::ios::binary) << config;
  }
  std::string flag() const { return absl::StrCat("--model_repository=", root_.string()); }

 private:
  fs::path root_;
};

// Before: a 100 KB model or input name went whole into the error (the client saw
// RESOURCE_EXHAUSTED "metadata size exceeds limit" instead) and into 300-400 KB log lines.
TEST(BoundsTest, NamesPastTheLimitAreInvalidArgumentAndStayOutOfTheLog) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start();
  ASSERT_TRUE(d.ok()) << d.status();
  auto stub = (*d)->Inference();
  const std::string huge(100'000, 'n');

  ModelInferRequest r = MlpRequest(1);
  r.set_model_name(huge);
  grpc::Status s = Infer(*stub, r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message().size();
  EXPECT_THAT(s.error_message(), HasSubstr("100000 bytes long; at most 256"));

  r = MlpRequest(1);
  r.mutable_inputs(0)->set_name(huge);
  s = Infer(*stub, r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message().size();
  EXPECT_THAT(s.error_message(), HasSubstr("input name"));

  inference::ModelReadyRequest ready;
  ready.set_name(huge);
  inference::ModelReadyResponse ready_response;
  s = stub->ModelReady(Context().get(), ready, &ready_response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message().size();

  inference::RepositoryModelLoadRequest load;
  load.set_model_name(huge);
  inference::RepositoryModelLoadResponse loaded;
  s = stub->RepositoryModelLoad(Context().get(), load, &loaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message().size();

  ExpectServes(*stub);
  EXPECT_LT(LongestLogLine((*d)->Log()), 4096u);
}

// Before: a 356 KB request naming one output 20,000 times produced a 51.8 MB response.
TEST(BoundsTest, RepeatedRequestedOutputsAreRefused) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start();
  ASSERT_TRUE(d.ok()) << d.status();
  auto stub = (*d)->Inference();
  ModelInferRequest r = MlpRequest(64);
  for (int i = 0; i < 20'000; ++i) r.add_outputs()->set_name("probabilities");
  const grpc::Status s = Infer(*stub, r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("output 'probabilities' is requested twice"));
  ExpectServes(*stub);
}

// Request, response and in-flight host bytes each have a cap; past one the client gets
// RESOURCE_EXHAUSTED naming the flag, and the next request is served.
TEST(BoundsTest, RequestResponseAndInflightCapsAreResourceExhausted) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(
      {"--max_request_bytes=64KiB", "--max_response_bytes=1KiB", "--max_inflight_host_bytes=8KiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto stub = (*d)->Inference();
  ExpectServes(*stub);

  // 100 KiB: gRPC refuses it from the length prefix.
  ModelInferRequest big = MlpRequest(1);
  big.set_raw_input_contents(0, std::string(100 << 10, '\0'));
  grpc::Status s = Infer(*stub, big);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  ExpectServes(*stub);

  // 16 KiB of input: within the message cap, past the in-flight budget.
  s = Infer(*stub, MlpRequest(64));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("--max_inflight_host_bytes"));
  ExpectServes(*stub);

  // 28 rows in (7 KiB), 28 x 10 FP32 out: past the 1 KiB response cap.
  s = Infer(*stub, MlpRequest(28));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("--max_response_bytes"));
  ExpectServes(*stub);

  // Nothing is held once the requests are answered; the refusals are counted (under
  // version="": a refused request never resolved one). A reply's bytes leave the budget
  // when gRPC deletes its call object, a moment after the client has the reply, so the
  // gauge is polled rather than read once.
  absl::StatusOr<std::string> metrics;
  std::optional<double> held;
  for (int i = 0; i < 600; ++i) {
    metrics = HttpGet((*d)->metrics_port(), "/metrics");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    held = MetricValue(*metrics, "ndserve_host_request_bytes", "");
    if (held == 0.0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(held, 0.0) << "host bytes still held after every call was answered";
  EXPECT_GE(MetricValue(*metrics, "ndserve_inference_requests_total",
                        R"(code="RESOURCE_EXHAUSTED",model="mlp",version="")")
                .value_or(0),
            2);
}

// Before: one config.pbtxt byte that is not UTF-8 made the stored load error invalid
// UTF-8, and RepositoryIndex undecodable for every client. Out-of-range instance counts
// grew the process to gigabytes and blocked every other load.
TEST(BoundsTest, BadConfigsFailTheirLoadOnlyAndTheIndexStaysReadable) {
  TempRepository repo;
  repo.AddMlpCopy("mlp");
  repo.AddMlpCopy("binary", "name: \"binary\"\nplatform: \"onnx\xFF\xFE\"\n");
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start({repo.flag()});
  ASSERT_TRUE(d.ok()) << d.status();
  auto stub = (*d)->Inference();

  inference::RepositoryIndexResponse index;
  grpc::Status s = stub->RepositoryIndex(Context().get(), {}, &index);
  ASSERT_TRUE(s.ok()) << s.error_message();
  bool listed = false;
  for (const auto& m : index.models()) {
    EXPECT_TRUE(IsValidUtf8(m.name()));
    EXPECT_TRUE(IsValidUtf8(m.reason())) << m.name();
    if (m.name() == "binary") {
      listed = true;
      EXPECT_EQ(m.state(), "UNAVAILABLE");
      EXPECT_THAT(m.reason(), HasSubstr("binary/config.pbtxt"));
    }
  }
  EXPECT_TRUE(listed);

  // Added while the daemon runs, loaded through the repository RPC.
  repo.AddMlpCopy("greedy", "instance_group [ { count: 2147483647 }, { count: 2147483647 } ]");
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("greedy");
  inference::RepositoryModelLoadResponse loaded;
  s = stub->RepositoryModelLoad(Context().get(), load, &loaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(),
              HasSubstr("greedy/config.pbtxt: instance_group count must be from 0 to 1024"));
  repo.AddMlpCopy("slow",
                  "max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: "
                  "18446744073709551615 }");
  load.set_model_name("slow");
  s = stub->RepositoryModelLoad(Context().get(), load, &loaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("max_queue_delay_microseconds must be at most"));
  ExpectServes(*stub);
}

// Before: a FIFO as token file hung the start, /dev/zero grew memory to 1.7 GB.
TEST(BoundsTest, TokenFilesThatAreNotSmallRegularFilesStopTheStartAtOnce) {
  const std::string fifo =
      (fs::temp_directory_path() / absl::StrCat("ndserve_bounds_fifo_", getpid())).string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::unique_ptr<DaemonProcess>> d =
      DaemonProcess::Start({absl::StrCat("--admin_token_file=", fifo)}, std::chrono::seconds(60));
  fs::remove(fifo);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("exited with 1"));
  EXPECT_THAT(d.status().message(), HasSubstr("not a regular file"));

  d = DaemonProcess::Start({"--admin_token_file=/dev/zero"}, std::chrono::seconds(60));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("exited with 1"));
  EXPECT_THAT(d.status().message(), HasSubstr("--admin_token_file='/dev/zero'"));
}

}  // namespace
}  // namespace ndserve::testing
