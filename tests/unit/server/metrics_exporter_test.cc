#include "server/metrics_exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "engine/dynamic_batcher.h"
#include "gtest/gtest.h"
#include "memory/device_pools.h"
#include "memory/pool.h"

namespace ndserve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const char* const kMemoryFamilies[] = {
    "ndserve_memory_allocated_bytes",         "ndserve_memory_cached_bytes",
    "ndserve_memory_reserved_bytes",          "ndserve_memory_limit_bytes",
    "ndserve_memory_peak_allocated_bytes",    "ndserve_memory_inactive_split_bytes",
    "ndserve_memory_outstanding_allocations", "ndserve_memory_alloc_total",
    "ndserve_memory_device_alloc_total",      "ndserve_memory_device_free_total",
    "ndserve_memory_reclaimed_bytes_total",   "ndserve_memory_oom_total",
    "process_resident_memory_bytes",
};

const char* const kManagerFamilies[] = {"ndserve_manager_live", "ndserve_manager_resources",
                                        "ndserve_manager_cap_violations_total"};

const char* const kInferenceFamilies[] = {
    "ndserve_inference_requests_total",
    "ndserve_inference_request_duration_seconds",
    "ndserve_inference_queue_duration_seconds",
    "ndserve_inference_compute_duration_seconds",
    "ndserve_inference_inflight",
    "ndserve_model_loaded",
    "ndserve_request_context_peak_bytes",
};

std::vector<ManagerLevelSample> FakeManagers() {
  return {{"system", 1, 0, 0}, {"model", 2, 10, 1}, {"predictor", 2, 0, 0}, {"context", 0, 0, 0}};
}

// Runs `promtool check metrics` on `text`. Empty optional when promtool is missing.
struct Promtool {
  bool available = false;
  int exit_code = 0;
  std::string output;
};
Promtool RunPromtool(const std::string& text) {
  Promtool result;
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return result;
  result.available = true;
  const std::filesystem::path in =
      std::filesystem::temp_directory_path() / absl::StrCat("ndserve_metrics_", getpid(), ".txt");
  std::ofstream(in) << text;
  FILE* pipe = popen(absl::StrCat("promtool check metrics < ", in.string(), " 2>&1").c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WEXITSTATUS(status);
  std::filesystem::remove(in);
  return result;
}

// Sends `request` to 127.0.0.1:port and returns the whole response.
std::string HttpExchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buffer[8192];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  return response;
}

// A bare HTTP/1.0 GET against 127.0.0.1:port; returns the whole response.
std::string HttpGet(int port, const std::string& path) {
  return HttpExchange(port,
                      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: localhost\r\n\r\n"));
}

// Opens `n` TCP connections to 127.0.0.1:port that never send a byte.
std::vector<int> IdleSockets(int port, int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    fds.push_back(fd);
  }
  return fds;
}

// HttpGet whose reads and writes give up after 10 s, the failure bound of the stall tests
// (a stalled listener answers after civetweb's 30 s default request timeout, or never).
std::string HttpGetWithin10s(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: localhost\r\n\r\n");
    (void)!write(fd, request.data(), request.size());
    char buffer[8192];
    ssize_t n;
    while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  }
  close(fd);
  return response;
}

class MetricsExporterTest : public ::testing::Test {
 protected:
  MetricsExporterTest() : pools_(MemoryConfig{}) {}

  void SetUp() override {
    absl::StatusOr<Pool*> pool = pools_.Get(Device::Cpu());
    ASSERT_TRUE(pool.ok());
    pool_ = *pool;
    absl::StatusOr<Block> a = pool_->Allocate(3000);
    absl::StatusOr<Block> b = pool_->Allocate(100000);
    ASSERT_TRUE(a.ok() && b.ok());
    live_ = *a;
    pool_->Free(*b);
    pool_->Reclaim(0, ReclaimReason::kAdmin);
  }
  void TearDown() override { pool_->Free(live_); }

  DevicePools pools_;
  Pool* pool_ = nullptr;
  Block live_;
};

TEST_F(MetricsExporterTest, TextHasEveryMemoryAndManagerFamily) {
  MetricsExporter exporter(&pools_, FakeManagers);
  const std::string text = exporter.Text();
  for (const char* family : kMemoryFamilies) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("# TYPE ", family, " "))) << family;
  }
  for (const char* family : kManagerFamilies) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("# TYPE ", family, " "))) << family;
  }
  EXPECT_THAT(text, HasSubstr("ndserve_memory_alloc_total{device=\"cpu:0\",pool=\"binned\","
                              "result=\"miss\"} 2"));
  EXPECT_THAT(text, HasSubstr("ndserve_memory_allocated_bytes{device=\"cpu:0\",pool=\"binned\"} "
                              "4096"));
  EXPECT_THAT(text, HasSubstr("ndserve_memory_reclaimed_bytes_total{device=\"cpu:0\",pool="
                              "\"binned\",reason=\"admin\"} 131072"));
  EXPECT_THAT(text, HasSubstr("ndserve_manager_cap_violations_total{level=\"model\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("process_resident_memory_bytes 0\n")));
}

TEST_F(MetricsExporterTest, ValuesFollowThePoolWithoutRegistration) {
  MetricsExporter exporter(&pools_);
  absl::StatusOr<Block> more = pool_->Allocate(1 << 20);
  ASSERT_TRUE(more.ok());
  EXPECT_THAT(exporter.Text(),
              HasSubstr(absl::StrCat("ndserve_memory_allocated_bytes{device=\"cpu:0\",pool="
                                     "\"binned\"} ",
                                     4096 + (1 << 20))));
  pool_->Free(*more);
  // No manager source: the manager families are left out rather than faked.
  EXPECT_THAT(exporter.Text(), Not(HasSubstr("ndserve_manager_live")));
}

TEST_F(MetricsExporterTest, ModelMemoryGaugeFollowsTheSource) {
  MetricsExporter exporter(&pools_);
  // No source: no family.
  EXPECT_THAT(exporter.Text(), Not(HasSubstr("ndserve_model_memory_bytes")));
  std::vector<ModelMemorySample> rows = {{"mlp", "1", "cpu:0", "parameters", 4096},
                                         {"mlp", "1", "cpu:0", "workspace", 0}};
  exporter.SetModelMemorySource([&rows] { return rows; });
  const std::string text = exporter.Text();
  EXPECT_THAT(text, HasSubstr("# TYPE ndserve_model_memory_bytes gauge"));
  EXPECT_THAT(text, HasSubstr("ndserve_model_memory_bytes{model=\"mlp\",version=\"1\",device="
                              "\"cpu:0\",kind=\"parameters\"} 4096"));
  EXPECT_THAT(text, HasSubstr("kind=\"workspace\"} 0"));
  // Unloaded: the series go with it.
  rows.clear();
  EXPECT_THAT(exporter.Text(), Not(HasSubstr("ndserve_model_memory_bytes")));
}

TEST_F(MetricsExporterTest, InferenceFamiliesAppearOnceRecorded) {
  MetricsExporter exporter(&pools_, FakeManagers);
  InferenceMetrics& m = exporter.inference();
  m.ModelLoaded("mlp", "1");
  {
    InferenceMetrics::InflightScope inflight = m.TrackInflight("mlp");
    EXPECT_THAT(exporter.Text(), HasSubstr("ndserve_inference_inflight{model=\"mlp\"} 1"));
  }
  m.RecordRequest({.model = "mlp",
                   .version = "1",
                   .code = absl::StatusCode::kOk,
                   .total_seconds = 0.002,
                   .queue_seconds = 0.0005,
                   .compute_seconds = 0.001,
                   .context_peak_bytes = 70000});
  m.RecordRequest({.model = "mlp",
                   .version = "1",
                   .code = absl::StatusCode::kInvalidArgument,
                   .total_seconds = 0.0001});
  const std::string text = exporter.Text();
  for (const char* family : kInferenceFamilies) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("# TYPE ", family, " "))) << family;
  }
  EXPECT_THAT(text, HasSubstr("ndserve_inference_inflight{model=\"mlp\"} 0"));
  EXPECT_THAT(text, HasSubstr("ndserve_model_loaded{model=\"mlp\",version=\"1\"} 1"));
  EXPECT_THAT(text, HasSubstr("ndserve_inference_requests_total{code=\"OK\",model=\"mlp\","
                              "version=\"1\"} 1"));
  EXPECT_THAT(text, HasSubstr("ndserve_inference_requests_total{code=\"INVALID_ARGUMENT\","
                              "model=\"mlp\",version=\"1\"} 1"));
  // Only codes that occurred get a series.
  EXPECT_THAT(text, Not(HasSubstr("code=\"NOT_FOUND\"")));
  EXPECT_THAT(text, HasSubstr("ndserve_inference_request_duration_seconds_count{model=\"mlp\","
                              "version=\"1\"} 2"));
  EXPECT_THAT(text, HasSubstr("ndserve_inference_queue_duration_seconds_count{model=\"mlp\","
                              "version=\"1\"} 1"));
  EXPECT_THAT(text, HasSubstr("ndserve_request_context_peak_bytes_count{model=\"mlp\"} 1"));

  m.ModelUnloaded("mlp", "1");
  EXPECT_THAT(exporter.Text(), HasSubstr("ndserve_model_loaded{model=\"mlp\",version=\"1\"} 0"));
}

TEST_F(MetricsExporterTest, RejectedRequestsAreCountedByReason) {
  MetricsExporter exporter(&pools_, FakeManagers);
  InferenceMetrics& m = exporter.inference();
  m.ModelLoaded("mlp", "1");
  for (int i = 0; i < 3; ++i) {
    m.RecordRequest({.model = "mlp",
                     .code = absl::StatusCode::kUnavailable,
                     .rejected_reason = engine::kRejectQueueFull});
  }
  m.RecordRequest({.model = "mlp",
                   .code = absl::StatusCode::kDeadlineExceeded,
                   .rejected_reason = engine::kRejectTimeout});
  // A reason outside the known set never becomes a label value.
  m.RecordRequest({.model = "mlp",
                   .code = absl::StatusCode::kUnavailable,
                   .rejected_reason = "client supplied"});
  const std::string text = exporter.Text();
  EXPECT_THAT(text, HasSubstr("ndserve_inference_rejected_total{model=\"mlp\",reason=\"queue_full\","
                              "version=\"\"} 3"));
  EXPECT_THAT(text, HasSubstr("ndserve_inference_rejected_total{model=\"mlp\",reason=\"timeout\","
                              "version=\"\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("client supplied")));
  EXPECT_THAT(text, Not(HasSubstr("reason=\"deadline\"")));
}

TEST_F(MetricsExporterTest, UnknownModelsAndVersionsDoNotGrowTheSeries) {
  MetricsExporter exporter(&pools_);
  InferenceMetrics& m = exporter.inference();
  m.ModelLoaded("mlp", "1");
  for (int i = 0; i < 50; ++i) {
    m.RecordRequest({.model = absl::StrCat("no-such-model-", i),
                     .version = "3",
                     .code = absl::StatusCode::kNotFound});
    m.RecordRequest(
        {.model = "mlp", .version = absl::StrCat(100 + i), .code = absl::StatusCode::kNotFound});
  }
  const std::string text = exporter.Text();
  EXPECT_THAT(text, Not(HasSubstr("no-such-model")));
  EXPECT_THAT(text, HasSubstr("ndserve_inference_requests_total{code=\"NOT_FOUND\",model=\""
                              "_unknown\",version=\"\"} 50"));
  EXPECT_THAT(text, HasSubstr("ndserve_inference_requests_total{code=\"NOT_FOUND\",model=\"mlp\","
                              "version=\"\"} 50"));
}

TEST_F(MetricsExporterTest, PassesPromtoolCheckMetrics) {
  MetricsExporter exporter(&pools_, FakeManagers);
  InferenceMetrics& m = exporter.inference();
  m.ModelLoaded("mlp", "1");
  m.RecordRequest({.model = "mlp",
                   .version = "1",
                   .total_seconds = 0.01,
                   .queue_seconds = 0.001,
                   .compute_seconds = 0.005,
                   .context_peak_bytes = 1 << 20});
  { InferenceMetrics::InflightScope s = m.TrackInflight("mlp"); }
  const Promtool promtool = RunPromtool(exporter.Text());
  if (!promtool.available) GTEST_SKIP() << "promtool is not installed";
  EXPECT_EQ(promtool.exit_code, 0) << promtool.output << "\n" << exporter.Text();
  EXPECT_EQ(promtool.output, "") << "promtool lint findings";
}

TEST_F(MetricsExporterTest, ServesTheSameTextOverHttp) {
  MetricsExporter exporter(&pools_, FakeManagers);
  ASSERT_TRUE(exporter.Start("127.0.0.1:0").ok());
  ASSERT_GT(exporter.port(), 0);
  const std::string response = HttpGet(exporter.port(), "/metrics");
  EXPECT_THAT(response, HasSubstr("200 OK"));
  for (const char* family : kMemoryFamilies) {
    EXPECT_THAT(response, HasSubstr(absl::StrCat("# TYPE ", family, " "))) << family;
  }
  exporter.Stop();
  EXPECT_EQ(exporter.port(), 0);
}

TEST_F(MetricsExporterTest, ServesHtmlPagesBesideMetrics) {
  MetricsExporter exporter(&pools_, FakeManagers);
  int renders = 0;
  exporter.AddHtmlPage("/memory", [&renders] {
    return absl::StrCat("<p>render ", ++renders, "</p>");
  });
  MetricsExporter other(&pools_, FakeManagers);
  other.AddHtmlPage("/memory", [] { return std::string("<p>other</p>"); });
  ASSERT_TRUE(exporter.Start("127.0.0.1:0").ok());
  ASSERT_TRUE(other.Start("127.0.0.1:0").ok());

  // Rendered per request, on the exporter the port belongs to.
  std::string response = HttpGet(exporter.port(), "/memory");
  EXPECT_THAT(response, HasSubstr("200 OK"));
  EXPECT_THAT(response, HasSubstr("Content-Type: text/html; charset=utf-8"));
  EXPECT_THAT(response, HasSubstr("<p>render 1</p>"));
  EXPECT_THAT(HttpGet(exporter.port(), "/memory?x=1"), HasSubstr("<p>render 2</p>"));
  EXPECT_THAT(HttpGet(other.port(), "/memory"), HasSubstr("<p>other</p>"));
  // HEAD: headers only; other methods refused.
  response = HttpExchange(exporter.port(), "HEAD /memory HTTP/1.0\r\n\r\n");
  EXPECT_THAT(response, HasSubstr("200 OK"));
  EXPECT_THAT(response, Not(HasSubstr("<p>")));
  EXPECT_THAT(HttpExchange(exporter.port(),
                           "POST /memory HTTP/1.0\r\nContent-Length: 0\r\n\r\n"),
              HasSubstr("405"));
  // /metrics is still prometheus-cpp's.
  EXPECT_THAT(HttpGet(exporter.port(), "/metrics"),
              HasSubstr("# TYPE ndserve_memory_allocated_bytes gauge"));
  other.Stop();
  exporter.Stop();
}

// Silent connections hold civetweb workers until its request timeout; fewer than the
// listener's threads must leave /metrics answering at once.
TEST_F(MetricsExporterTest, IdleConnectionsDoNotStallAScrape) {
  MetricsExporter exporter(&pools_, FakeManagers);
  ASSERT_TRUE(exporter.Start("127.0.0.1:0").ok());
  const std::vector<int> idle = IdleSockets(exporter.port(), 8);
  EXPECT_THAT(HttpGetWithin10s(exporter.port(), "/metrics"),
              HasSubstr("ndserve_memory_allocated_bytes"));
  for (int fd : idle) close(fd);
}

// More silent connections than threads: the request timeout frees the workers they hold,
// so a scrape queued behind them is still answered.
TEST_F(MetricsExporterTest, MoreIdleConnectionsThanThreadsOnlyDelayAScrape) {
  MetricsExporter exporter(&pools_, FakeManagers);
  ASSERT_TRUE(exporter.Start("127.0.0.1:0").ok());
  const std::vector<int> idle = IdleSockets(exporter.port(), 48);
  EXPECT_THAT(HttpGetWithin10s(exporter.port(), "/metrics"),
              HasSubstr("ndserve_memory_allocated_bytes"));
  for (int fd : idle) close(fd);
}

TEST_F(MetricsExporterTest, UnbindableAddressIsAnErrorNamingTheFlag) {
  MetricsExporter first(&pools_);
  ASSERT_TRUE(first.Start("127.0.0.1:0").ok());
  MetricsExporter second(&pools_);
  absl::Status s = second.Start(absl::StrCat("127.0.0.1:", first.port()));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("--metrics_address"));
}

}  // namespace
}  // namespace ndserve
