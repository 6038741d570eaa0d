#ifndef NDSERVE_TESTS_INTEGRATION_INTEGRATION_SUPPORT_H_
#define NDSERVE_TESTS_INTEGRATION_INTEGRATION_SUPPORT_H_

// Helpers for the integration tests that drive a real `ndserved` process over loopback:
// starting it on free ports, gRPC stubs, /metrics scraping and the fixture reference
// cases (tests/fixtures/models/*/reference/case.txt).

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/admin.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "proto/inference.grpc.pb.h"

namespace ndserve::testing {

// The built daemon (compile definition NDSERVED_PATH, or $NDSERVED) and the source tree.
std::string NdservedPath();
std::string SourceDir();

// One `ndserved` child process on random free loopback ports, its output in a log file.
// Start retries with other ports when one turns out to be taken (port 0 cannot be used:
// the child would have to report the ports it bound). The destructor kills the process
// if it still runs. Not thread-safe (one test thread drives it; stubs are thread-safe).
class DaemonProcess {
 public:
  // A flag for Start: serve HTTP/REST on a free loopback port (http_port()).
  static constexpr char kServeHttp[] = "--http_address=<loopback>";

  // Starts the daemon with --device=cpu (or $NDSERVE_TEST_DEVICE), the default model
  // repository (examples/models) and `flags`, and waits until readiness is SERVING.
  // `grpc_credentials` (default: plain text) is what Inference(), Health() and the
  // readiness check connect to the inference port with, for a daemon serving TLS.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(
      const std::vector<std::string>& flags = {},
      std::chrono::seconds ready_timeout = std::chrono::seconds(120),
      std::shared_ptr<grpc::ChannelCredentials> grpc_credentials = nullptr);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  int grpc_port() const { return grpc_port_; }
  int admin_port() const { return admin_port_; }
  int metrics_port() const { return metrics_port_; }
  // The HTTP/REST port when started with kServeHttp.
  int http_port() const { return http_port_; }
  pid_t pid() const { return pid_; }

  std::unique_ptr<inference::GRPCInferenceService::Stub> Inference() const;
  std::unique_ptr<grpc::health::v1::Health::Stub> Health() const;
  std::unique_ptr<ndserve::admin::v1::MemoryAdmin::Stub> Admin() const;

  void Signal(int sig) const;
  // The exit status (as WEXITSTATUS, or 128+signal), nullopt on timeout.
  std::optional<int> Wait(std::chrono::seconds timeout);
  bool Running();
  // Everything the daemon printed so far.
  std::string Log() const;

 private:
  DaemonProcess() = default;
  // Spawns on the ports set; false if the process exited before it was ready, with
  // `port_taken` telling whether it failed to bind.
  bool Spawn(const std::vector<std::string>& flags, std::chrono::seconds ready_timeout,
             bool* port_taken, std::string* error);

  int grpc_port_ = 0;
  int admin_port_ = 0;
  int metrics_port_ = 0;
  int http_port_ = 0;
  pid_t pid_ = -1;
  std::shared_ptr<grpc::ChannelCredentials> grpc_credentials_;
  std::optional<int> exit_status_;
  std::string log_path_;
};

// A channel to 127.0.0.1:port without message size caps and with a short reconnect
// backoff; plain text unless `credentials` is given (TLS channels expect the server
// certificate to name "localhost").
std::shared_ptr<grpc::Channel> LoopbackChannel(
    int port, std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

// Plain-HTTP GET of http://127.0.0.1:port/path; the body.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

// The value of the Prometheus sample `name{labels}` (labels exactly as printed, e.g.
// `level="model"`), nullopt if absent.
std::optional<double> MetricValue(const std::string& text, const std::string& name,
                                  const std::string& labels);

// Sum of allocated_bytes over every pool (admin GetMemoryStatus, all devices).
absl::StatusOr<uint64_t> AllocatedBytes(ndserve::admin::v1::MemoryAdmin::Stub& admin);

// One tensor of a reference case.
struct CaseTensor {
  std::string name;
  std::string datatype;  // KServe spelling
  std::vector<int64_t> shape;
  std::string bytes;  // little-endian contents of the .bin file
};

// A model's reference case: inputs to feed, outputs numpy computed, and the tolerance.
struct ReferenceCase {
  std::vector<CaseTensor> inputs;
  std::vector<CaseTensor> outputs;
  double atol = 0;
  double rtol = 0;
};

// Reads tests/fixtures/models/<model>/reference/case.txt and its .bin files (through
// tests/fixture_case.h, the reader every test binary shares).
absl::StatusOr<ReferenceCase> ReadReferenceCase(const std::string& model);
// Reads <dir>/case.txt and its .bin files (any folder in the case.txt grammar).
absl::StatusOr<ReferenceCase> ReadReferenceCaseAt(const std::string& dir);

// A ModelInferRequest for `model` with the case's inputs as raw contents.
inference::ModelInferRequest RequestFor(const std::string& model, const ReferenceCase& c);

// A model repository in a fresh folder under /tmp, removed with the object: for daemons
// that serve the examples' ONNX files under configs of a test's own.
class TempModelRepository {
 public:
  TempModelRepository();  // the folder, or an empty path() when it cannot be made
  ~TempModelRepository();
  TempModelRepository(const TempModelRepository&) = delete;
  TempModelRepository& operator=(const TempModelRepository&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Model `name`, version 1: a link to `onnx` and a config.pbtxt of
  // `name: "<name>"` followed by `config`.
  void AddModel(const std::string& name, const std::filesystem::path& onnx,
                const std::string& config);
  // examples/models/<name> as it is: its version 1's ONNX file and its config.pbtxt.
  void AddExample(const std::string& name);

 private:
  std::filesystem::path path_;
};

}  // namespace ndserve::testing

#endif  // NDSERVE_TESTS_INTEGRATION_INTEGRATION_SUPPORT_H_
