#include "tests/integration/integration_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "memory/dtype.h"
#include "tests/fixture_case.h"

extern char** environ;

namespace ndserve::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool PortFree(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

int RandomFreePort(std::mt19937& rng, const std::vector<int>& taken) {
  // Below the kernel's default ephemeral range (32768-60999): a port there can be handed to
  // any client socket between this check and the daemon's bind.
  std::uniform_int_distribution<int> dist(20000, 32767);
  while (true) {
    const int port = dist(rng);
    if (std::find(taken.begin(), taken.end(), port) == taken.end() && PortFree(port)) return port;
  }
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

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string NdservedPath() {
  if (const char* env = std::getenv("NDSERVED"); env != nullptr && *env != '\0') return env;
#ifdef NDSERVED_PATH
  return NDSERVED_PATH;
#else
  return "ndserved";
#endif
}

std::string SourceDir() {
  if (const char* env = std::getenv("NDSERVE_SOURCE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef NDSERVE_SOURCE_DIR
  return NDSERVE_SOURCE_DIR;
#else
  return ".";
#endif
}

std::shared_ptr<grpc::Channel> LoopbackChannel(
    int port, std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  if (credentials == nullptr) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    args.SetSslTargetNameOverride("localhost");
  }
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), credentials, args);
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(
    const std::vector<std::string>& flags, std::chrono::seconds ready_timeout,
    std::shared_ptr<grpc::ChannelCredentials> grpc_credentials) {
  std::mt19937 rng(std::random_device{}());
  std::string last_error;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::unique_ptr<DaemonProcess> d(new DaemonProcess());
    d->grpc_credentials_ = grpc_credentials;
    d->grpc_port_ = RandomFreePort(rng, {});
    d->admin_port_ = RandomFreePort(rng, {d->grpc_port_});
    d->metrics_port_ = RandomFreePort(rng, {d->grpc_port_, d->admin_port_});
    d->http_port_ = RandomFreePort(rng, {d->grpc_port_, d->admin_port_, d->metrics_port_});
    bool port_taken = false;
    if (d->Spawn(flags, ready_timeout, &port_taken, &last_error)) return d;
    if (!port_taken) break;
  }
  return absl::InternalError(last_error);
}

bool DaemonProcess::Spawn(const std::vector<std::string>& flags, std::chrono::seconds ready_timeout,
                          bool* port_taken, std::string* error) {
  char log_template[] = "/tmp/ndserved-test-XXXXXX";
  const int log_fd = mkstemp(log_template);
  if (log_fd < 0) {
    *error = "mkstemp failed";
    return false;
  }
  close(log_fd);
  log_path_ = log_template;

  const char* device_env = std::getenv("NDSERVE_TEST_DEVICE");
  std::vector<std::string> args = {
      NdservedPath(),
      absl::StrCat("--grpc_address=127.0.0.1:", grpc_port_),
      absl::StrCat("--admin_address=127.0.0.1:", admin_port_),
      absl::StrCat("--metrics_address=127.0.0.1:", metrics_port_),
      absl::StrCat("--device=", device_env != nullptr ? device_env : "cpu"),
      // No HTTP listener unless a test asks for one (a later --http_address wins): tests
      // run in parallel and would all want port 8000.
      "--http_address=",
  };
  for (const std::string& flag : flags) {
    args.push_back(flag == kServeHttp ? absl::StrCat("--http_address=127.0.0.1:", http_port_)
                                      : flag);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path_.c_str(), O_WRONLY | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  // The daemon runs from the source tree, as an operator would start it there.
  const std::string source_dir = SourceDir();
  posix_spawn_file_actions_addchdir_np(&actions, source_dir.c_str());
  const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *error = absl::StrCat("cannot start ", argv[0], ": ", strerror(rc));
    pid_ = -1;
    return false;
  }

  const auto deadline = Clock::now() + ready_timeout;
  auto health = Health();
  auto health_since = Clock::now();
  int checks = 0;
  while (Clock::now() < deadline) {
    if (!Running()) {
      const std::string log = Log();
      *port_taken = absl::StrContains(log, "cannot listen");
      *error = absl::StrCat("ndserved exited with ", exit_status_.value_or(-1), ":\n", log);
      return false;
    }
    if (CanConnect(grpc_port_)) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      grpc::health::v1::HealthCheckRequest request;
      request.set_service("readiness");
      grpc::health::v1::HealthCheckResponse response;
      ++checks;
      if (health->Check(&context, request, &response).ok() &&
          response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
        return true;
      }
      // A TLS channel that connected while the daemon was still starting was once seen
      // stuck for the whole timeout on a loaded machine (never reproduced alone): a new
      // channel every few seconds keeps one bad connection from deciding readiness.
      if (Clock::now() - health_since > std::chrono::seconds(5)) {
        health = Health();
        health_since = Clock::now();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *error = absl::StrCat("ndserved did not become ready (", checks, " health checks):\n", Log());
  return false;
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0 && Running()) {
    kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
  if (!log_path_.empty()) unlink(log_path_.c_str());
}

std::unique_ptr<inference::GRPCInferenceService::Stub> DaemonProcess::Inference() const {
  return inference::GRPCInferenceService::NewStub(LoopbackChannel(grpc_port_, grpc_credentials_));
}

std::unique_ptr<grpc::health::v1::Health::Stub> DaemonProcess::Health() const {
  return grpc::health::v1::Health::NewStub(LoopbackChannel(grpc_port_, grpc_credentials_));
}

std::unique_ptr<ndserve::admin::v1::MemoryAdmin::Stub> DaemonProcess::Admin() const {
  return ndserve::admin::v1::MemoryAdmin::NewStub(LoopbackChannel(admin_port_));
}

void DaemonProcess::Signal(int sig) const {
  if (pid_ > 0) kill(pid_, sig);
}

bool DaemonProcess::Running() {
  if (exit_status_.has_value() || pid_ <= 0) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return false;
}

std::optional<int> DaemonProcess::Wait(std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Running()) {
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exit_status_;
}

std::string DaemonProcess::Log() const {
  absl::StatusOr<std::string> text = ReadFile(log_path_);
  return text.ok() ? *text : "";
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to port ", port));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("short write");
  }
  std::string response;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos || !absl::StartsWith(response, "HTTP/1.")) {
    return absl::InternalError("malformed HTTP response");
  }
  if (response.find(" 200 ") > response.find("\r\n")) {
    return absl::InternalError(absl::StrCat("HTTP error: ", response.substr(0, 80)));
  }
  return response.substr(body + 4);
}

std::optional<double> MetricValue(const std::string& text, const std::string& name,
                                  const std::string& labels) {
  const std::string key = labels.empty() ? name + " " : absl::StrCat(name, "{", labels, "} ");
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, key)) {
      double v;
      if (absl::SimpleAtod(line.substr(0, line.find(' ')), &v)) return v;
    }
  }
  return std::nullopt;
}

absl::StatusOr<uint64_t> AllocatedBytes(ndserve::admin::v1::MemoryAdmin::Stub& admin) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ndserve::admin::v1::GetMemoryStatusRequest request;
  request.set_device_id(-1);
  ndserve::admin::v1::MemoryStatus status;
  grpc::Status s = admin.GetMemoryStatus(&context, request, &status);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  uint64_t total = 0;
  for (const auto& pool : status.pools()) total += pool.allocated_bytes();
  return total;
}

absl::StatusOr<ReferenceCase> ReadReferenceCase(const std::string& model) {
  return ReadReferenceCaseAt(
      absl::StrCat(SourceDir(), "/tests/fixtures/models/", model, "/reference"));
}

absl::StatusOr<ReferenceCase> ReadReferenceCaseAt(const std::string& dir) {
  absl::StatusOr<fixtures::FixtureCase> fixture = fixtures::ReadFixtureCase(dir);
  if (!fixture.ok()) return fixture.status();
  auto to_wire = [](const fixtures::FixtureTensor& t) {
    return CaseTensor{t.name, std::string(DTypeName(t.dtype)), t.dims,
                      std::string(t.bytes.begin(), t.bytes.end())};
  };
  ReferenceCase c;
  for (const fixtures::FixtureTensor* t : fixture->GraphInputs()) c.inputs.push_back(to_wire(*t));
  for (const fixtures::FixtureTensor& t : fixture->outputs) c.outputs.push_back(to_wire(t));
  c.atol = fixture->atol;
  c.rtol = fixture->rtol;
  if (c.inputs.empty() || c.outputs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, "/case.txt has no inputs or outputs"));
  }
  return c;
}

inference::ModelInferRequest RequestFor(const std::string& model, const ReferenceCase& c) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  for (const CaseTensor& t : c.inputs) {
    auto* in = request.add_inputs();
    in->set_name(t.name);
    in->set_datatype(t.datatype);
    for (int64_t d : t.shape) in->add_shape(d);
    request.add_raw_input_contents(t.bytes);
  }
  return request;
}

TempModelRepository::TempModelRepository() {
  char dir[] = "/tmp/ndserve-repo-XXXXXX";
  if (mkdtemp(dir) != nullptr) path_ = dir;
}

TempModelRepository::~TempModelRepository() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

void TempModelRepository::AddModel(const std::string& name, const std::filesystem::path& onnx,
                                   const std::string& config) {
  std::filesystem::create_directories(path_ / name / "1");
  std::filesystem::create_symlink(onnx, path_ / name / "1" / "model.onnx");
  std::ofstream(path_ / name / "config.pbtxt") << "name: \"" << name << "\"\n" << config;
}

void TempModelRepository::AddExample(const std::string& name) {
  const std::filesystem::path example =
      std::filesystem::path(SourceDir()) / "examples/models" / name;
  std::filesystem::create_directories(path_ / name / "1");
  std::filesystem::create_symlink(example / "1/model.onnx", path_ / name / "1" / "model.onnx");
  std::filesystem::copy_file(example / "config.pbtxt", path_ / name / "config.pbtxt");
}

}  // namespace ndserve::testing
