// The daemon's listeners end to end, in process: health on the inference port, the
// admin API on its own port, /metrics over HTTP, and the graceful stop.
#include "server/daemon.h"

#include <arpa/inet.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memory/memory_system.h"
#include "proto/admin.grpc.pb.h"
#include "proto/health.grpc.pb.h"

namespace ndserve {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;

std::shared_ptr<grpc::Channel> Channel(int port) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
}

// The status `service` reports, or the RPC's error code as a negative number.
int Check(Health::Stub& stub, const std::string& service) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  grpc::Status status = stub.Check(&context, request, &response);
  if (!status.ok()) return -static_cast<int>(status.error_code());
  return response.status();
}

bool CanConnect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// Records the order in which the daemon drives a PortService.
class FakePortService : public PortService {
 public:
  explicit FakePortService(std::string* log) : log_(log) {}
  void Register(grpc::ServerBuilder&) override { *log_ += "register;"; }
  void Start(grpc::Server&) override { *log_ += "start;"; }
  void Stop() override { *log_ += "stop;"; }

 private:
  std::string* log_;
};

Options LocalOptions() {
  Options o;
  o.grpc_address = "127.0.0.1:0";
  o.metrics_address = "127.0.0.1:0";
  o.admin_address = "127.0.0.1:0";
  o.exit_timeout_seconds = 1;
  return o;
}

TEST(DaemonTest, ServesHealthAdminAndMetricsThenStops) {
  MemorySystem memory;
  ASSERT_TRUE(memory.GetPool(Device::Cpu()).ok());
  std::string log;
  Daemon daemon(LocalOptions(), &memory);
  daemon.AddPortService(std::make_unique<FakePortService>(&log));
  absl::Status started = daemon.Start();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(log, "register;start;");
  ASSERT_GT(daemon.grpc_port(), 0);
  ASSERT_GT(daemon.admin_port(), 0);
  ASSERT_GT(daemon.metrics_port(), 0);

  auto health = Health::NewStub(Channel(daemon.grpc_port()));
  EXPECT_EQ(Check(*health, "liveness"), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(*health, "readiness"), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check(*health, ""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check(*health, "no-such-service"), -static_cast<int>(grpc::StatusCode::NOT_FOUND));

  daemon.health().SetReady(true);
  EXPECT_EQ(Check(*health, "readiness"), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(*health, ""), HealthCheckResponse::SERVING);

  auto admin = ndserve::admin::v1::MemoryAdmin::NewStub(Channel(daemon.admin_port()));
  grpc::ClientContext context;
  ndserve::admin::v1::GetMemoryStatusRequest request;
  request.set_device_id(-1);
  ndserve::admin::v1::MemoryStatus status;
  ASSERT_TRUE(admin->GetMemoryStatus(&context, request, &status).ok());
  EXPECT_EQ(status.pools_size(), 1);

  ASSERT_TRUE(CanConnect(daemon.metrics_port()));

  daemon.StopServing();
  EXPECT_EQ(log, "register;start;stop;");
  EXPECT_FALSE(daemon.health().ready());
  EXPECT_TRUE(daemon.health().live());
  // The inference port is closed; admin and metrics still answer during the unload.
  EXPECT_LT(Check(*health, "liveness"), 0);
  grpc::ClientContext after;
  EXPECT_TRUE(admin->GetMemoryStatus(&after, request, &status).ok());
  EXPECT_TRUE(CanConnect(daemon.metrics_port()));

  const int metrics_port = daemon.metrics_port();
  daemon.Close();
  EXPECT_FALSE(CanConnect(metrics_port));
}

TEST(DaemonTest, AddressInUseIsAStartupErrorNamingTheFlag) {
  MemorySystem memory;
  Daemon first(LocalOptions(), &memory);
  ASSERT_TRUE(first.Start().ok());

  Options clash = LocalOptions();
  clash.admin_address = absl::StrCat("127.0.0.1:", first.admin_port());
  Daemon second(clash, &memory);
  absl::Status s = second.Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("--admin_address"));
}

TEST(DaemonTest, OpenHealthWatchDoesNotHoldTheDrain) {
  MemorySystem memory;
  Options options = LocalOptions();
  options.exit_timeout_seconds = 20;
  Daemon daemon(options, &memory);
  ASSERT_TRUE(daemon.Start().ok());
  daemon.health().SetReady(true);

  auto health = Health::NewStub(Channel(daemon.grpc_port()));
  grpc::ClientContext context;
  HealthCheckRequest request;
  request.set_service("readiness");
  auto reader = health->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  const auto start = std::chrono::steady_clock::now();
  daemon.StopServing();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // The watcher saw readiness drop before its stream ended.
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&response));
}

// A HealthService alone on a server: the callback service needs no completion queue.
class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = Health::NewStub(Channel(port_));
  }
  void TearDown() override {
    service_.EndWatches();
    server_->Shutdown();
  }

  HealthState state_;
  HealthService service_{&state_};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Health::Stub> stub_;
};

TEST_F(HealthServiceTest, CheckFollowsTheState) {
  EXPECT_EQ(Check(*stub_, "liveness"), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(*stub_, "readiness"), HealthCheckResponse::NOT_SERVING);
  state_.SetReady(true);
  EXPECT_EQ(Check(*stub_, "readiness"), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(*stub_, ""), HealthCheckResponse::SERVING);
  state_.SetLive(false);
  EXPECT_EQ(Check(*stub_, "liveness"), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check(*stub_, "other"), -static_cast<int>(grpc::StatusCode::NOT_FOUND));
}

TEST_F(HealthServiceTest, WatchStreamsChangesAndEndsOnShutdown) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest request;
  request.set_service("readiness");
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  state_.SetLive(false);  // not the watched name: no message
  state_.SetReady(true);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  state_.SetReady(false);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);

  const auto start = std::chrono::steady_clock::now();
  service_.EndWatches();
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));

  // After EndWatches new watches are refused rather than left hanging.
  grpc::ClientContext late;
  auto refused = stub_->Watch(&late, request);
  EXPECT_FALSE(refused->Read(&response));
  EXPECT_EQ(refused->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(HealthServiceTest, WatchOfAnUnknownNameSaysServiceUnknown) {
  grpc::ClientContext context;
  HealthCheckRequest request;
  request.set_service("nope");
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  context.TryCancel();
  EXPECT_FALSE(reader->Read(&response));
}

TEST(HealthStateTest, ListenersSeeEveryChangeInOrder) {
  struct Recorder : HealthState::Listener {
    void HealthChanged(bool live, bool ready) override {
      seen += absl::StrCat(live ? "L" : "l", ready ? "R" : "r", " ");
    }
    std::string seen;
  } recorder;
  HealthState state;
  state.AddListener(&recorder);
  state.SetReady(true);
  state.SetLive(false);
  state.RemoveListener(&recorder);
  state.SetReady(false);
  EXPECT_EQ(recorder.seen, "Lr LR lR ");
}

}  // namespace
}  // namespace ndserve
