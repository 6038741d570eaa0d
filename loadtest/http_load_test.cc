// The HTTP/REST side of ndserve-loadtest: request bodies built from the gRPC request,
// metadata parsing, and RunHttpLoad against an in-process cpp-httplib server.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "loadtest/http_body.h"
#include "loadtest/http_load_driver.h"
#include "loadtest/report.h"
#include "rapidjson/document.h"

namespace ndserve::loadtest {
namespace {

inference::ModelInferRequest TwoInputs() {
  inference::ModelInferRequest r;
  r.set_id("x1");
  auto* a = r.add_inputs();
  a->set_name("a");
  a->set_datatype("FP32");
  a->add_shape(1);
  a->add_shape(2);
  const float f[2] = {0.5f, -3.0f};
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(f), sizeof(f)));
  auto* b = r.add_inputs();
  b->set_name("b");
  b->set_datatype("INT64");
  b->add_shape(1);
  const int64_t i = -7;
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(&i), sizeof(i)));
  return r;
}

TEST(HttpBodyTest, JsonCarriesEveryValueAsNumbers) {
  absl::StatusOr<HttpInferBody> body = HttpInferBodyFor(TwoInputs(), HttpFormat::kJson);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(body->json_bytes, 0u);
  EXPECT_EQ(body->body,
            R"({"id":"x1","inputs":[{"name":"a","datatype":"FP32","shape":[1,2],"data":[0.5,-3.0]},)"
            R"({"name":"b","datatype":"INT64","shape":[1],"data":[-7]}]})");
}

TEST(HttpBodyTest, BinaryAppendsTheRawBytesAfterTheHeader) {
  const inference::ModelInferRequest r = TwoInputs();
  absl::StatusOr<HttpInferBody> body = HttpInferBodyFor(r, HttpFormat::kBinary);
  ASSERT_TRUE(body.ok()) << body.status();
  ASSERT_GT(body->json_bytes, 0u);
  EXPECT_EQ(body->body.substr(body->json_bytes),
            r.raw_input_contents(0) + r.raw_input_contents(1));
  rapidjson::Document doc;
  const std::string json = body->body.substr(0, body->json_bytes);
  doc.Parse(json.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json;
  EXPECT_TRUE(doc["parameters"]["binary_data_output"].GetBool());
  EXPECT_EQ(doc["inputs"][0]["parameters"]["binary_data_size"].GetInt(), 8);
  EXPECT_EQ(doc["inputs"][1]["parameters"]["binary_data_size"].GetInt(), 8);
  EXPECT_FALSE(doc["inputs"][0].HasMember("data"));
}

TEST(HttpBodyTest, HalfFloatsHaveNoJsonForm) {
  inference::ModelInferRequest r;
  auto* a = r.add_inputs();
  a->set_name("h");
  a->set_datatype("FP16");
  a->add_shape(1);
  r.add_raw_input_contents(std::string(2, '\0'));
  EXPECT_EQ(HttpInferBodyFor(r, HttpFormat::kJson).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(HttpInferBodyFor(r, HttpFormat::kBinary).ok());
}

TEST(HttpBodyTest, InputsFromMetadata) {
  absl::StatusOr<std::vector<TensorSpec>> specs = InputsFromHttpMetadata(
      R"({"name":"mlp","versions":["1"],"platform":"onnx","inputs":[)"
      R"({"name":"input","datatype":"FP32","shape":[-1,64]}],"outputs":[]})");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].name, "input");
  EXPECT_EQ((*specs)[0].datatype, "FP32");
  EXPECT_EQ((*specs)[0].shape, (std::vector<int64_t>{-1, 64}));
  EXPECT_FALSE(InputsFromHttpMetadata(R"({"inputs":3})").ok());
  EXPECT_FALSE(InputsFromHttpMetadata("not json").ok());
  EXPECT_EQ(HttpModelPath("m", ""), "/v2/models/m");
  EXPECT_EQ(HttpModelPath("m", "2"), "/v2/models/m/versions/2");
}

// An infer endpoint that answers every third request 503 and the others with outputs,
// and records the binary header lengths it was sent.
class HttpLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
      res.status = 200;
    });
    server_.Post("/v2/models/m/infer", [this](const httplib::Request& req,
                                              httplib::Response& res) {
      if (req.get_header_value("Inference-Header-Content-Length") != "5") bad_header_++;
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
      if (calls_.fetch_add(1) % 3 == 2) {
        res.status = 503;
        res.set_content(R"({"error":"busy"})", "application/json");
        return;
      }
      res.set_content(R"({"outputs":[{"name":"y","datatype":"FP32","shape":[1],"data":[1]}]})",
                      "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> calls_{0};
  std::atomic<int> bad_header_{0};
  std::atomic<int> delay_ms_{0};  // before each infer reply
};

TEST_F(HttpLoadTest, ClosedLoopSendsTheRequestCountAndCountsErrorsByStatus) {
  LoadOptions options;
  options.address = "127.0.0.1:" + std::to_string(port_);
  options.concurrency = 4;
  options.max_requests = 30;
  options.validate_every = 1;
  absl::StatusOr<LoadResult> result =
      RunHttpLoad(options, "/v2/models/m/infer", {HttpInferBody{"{}xyz", 5}});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sent, 30);
  EXPECT_EQ(calls_.load(), 30);
  EXPECT_EQ(result->ok, 20);
  EXPECT_EQ(result->errors["HTTP_503"], 10);
  EXPECT_EQ(bad_header_.load(), 0);
  EXPECT_EQ(result->request_bytes, 30 * 5);
}

// 40 requests due at 200/s over 4 connections: the schedule, not the replies, sets the
// pace, so the run lasts about 40 / 200 s even though every reply is instant.
TEST_F(HttpLoadTest, OpenLoopSendsOnTheSchedule) {
  LoadOptions options;
  options.address = "127.0.0.1:" + std::to_string(port_);
  options.concurrency = 4;
  options.rate = 200;
  options.max_requests = 40;
  options.validate_every = 1;
  absl::StatusOr<LoadResult> result =
      RunHttpLoad(options, "/v2/models/m/infer", {HttpInferBody{"{}xyz", 5}});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sent + result->not_sent, 40);
  EXPECT_EQ(calls_.load(), result->sent);
  EXPECT_EQ(result->ok + result->errors["HTTP_503"], result->sent);
  EXPECT_EQ(result->error_latency.count(), result->errors["HTTP_503"]);
  // The last slot is due at 39 / 200 s = 195 ms after the start.
  EXPECT_GE(result->elapsed, absl::Milliseconds(190));
}

// A server that takes 50 ms per reply behind one connection at 100/s falls behind; the
// late slots beyond max_outstanding are counted as not sent instead of piling up.
TEST_F(HttpLoadTest, OpenLoopLateSlotsPastTheBoundAreNotSent) {
  delay_ms_ = 50;
  LoadOptions options;
  options.address = "127.0.0.1:" + std::to_string(port_);
  options.concurrency = 1;
  options.rate = 100;
  options.max_requests = 30;
  options.max_outstanding = 2;
  absl::StatusOr<LoadResult> result =
      RunHttpLoad(options, "/v2/models/m/infer", {HttpInferBody{"{}xyz", 5}});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sent + result->not_sent, 30);
  EXPECT_GT(result->not_sent, 0);
  EXPECT_EQ(result->ok + result->errors["HTTP_503"], result->sent);
  // A late slot's wait for the connection counts: latency is above the server's 50 ms.
  EXPECT_GT(result->latency.Percentile(0.99), 50'000'000);
}

// The text report says how an HTTP run was driven: the loop, the body format and its
// connections (not the gRPC client's threads and channels).
TEST(HttpReportTest, NamesTheLoopTheFormatAndTheConnections) {
  Report r;
  r.model = "mlp";
  r.mode = "open, http binary";
  r.rate = 500;
  r.concurrency = 4;
  r.threads = 2;
  r.channels = 2;
  std::ostringstream text;
  PrintText(r, text);
  EXPECT_NE(text.str().find("open loop at 500.0 req/s, http binary, 4 connections"),
            std::string::npos)
      << text.str();
  r.mode = "closed";
  std::ostringstream grpc;
  PrintText(r, grpc);
  EXPECT_NE(grpc.str().find("closed loop, 4 concurrent requests, 2 threads, 2 connections"),
            std::string::npos)
      << grpc.str();
}

TEST_F(HttpLoadTest, SoakIsRefusedAndUnreachableFails) {
  LoadOptions options;
  options.address = "127.0.0.1:" + std::to_string(port_);
  options.max_requests = 1;
  options.pause_every = 10;
  EXPECT_EQ(RunHttpLoad(options, "/v2/models/m/infer", {HttpInferBody{"{}", 0}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.pause_every = 0;
  options.address = "127.0.0.1:1";
  options.connect_timeout = absl::Seconds(1);
  EXPECT_EQ(RunHttpLoad(options, "/v2/models/m/infer", {HttpInferBody{"{}", 0}}).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ndserve::loadtest
