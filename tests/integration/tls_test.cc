// TLS on the real `ndserved`: a CA, a server and a client certificate made here with
// Debian's `openssl` CLI; the inference port with TLS and with mutual TLS, the admin port
// with TLS, client CA and token; plain-text clients, clients trusting another CA and
// clients without a certificate are refused; with --tls_reload_seconds a certificate
// replaced on disk is served without a restart. The HTTP/REST port the same way, with
// cpp-httplib's SSLClient as the client.
#include <grpcpp/client_context.h>
#include <grpcpp/security/credentials.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/integration_support.h"

namespace ndserve::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A throw-away PKI in a temp dir: ca.pem signs server.pem (SAN localhost, 127.0.0.1) and
// client.pem; other_ca.pem signs other_server.pem and other_client.pem. EC P-256 keys,
// quick to make.
class Pki {
 public:
  Pki() {
    char dir[] = "/tmp/ndserve-tls-XXXXXX";
    dir_ = mkdtemp(dir);
    const std::string d = dir_.string();
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    ok_ = Run(absl::StrCat("cd ", d, " && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n",
                           "extendedKeyUsage=serverAuth\\n' > server.ext && printf ",
                           "'extendedKeyUsage=clientAuth\\n' > client.ext")) &&
          MakeCa("ca", key) && MakeCa("other_ca", key) && MakeLeaf("server", "ca", key) &&
          MakeLeaf("client", "ca", key) && MakeLeaf("other_client", "other_ca", key) &&
          MakeLeaf("other_server", "other_ca", key);
  }
  ~Pki() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  bool ok() const { return ok_; }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string pem(const std::string& name) const { return ReadText(dir_ / name); }

  // Trusts `ca`; presents `client` (e.g. "client") when not empty.
  std::shared_ptr<grpc::ChannelCredentials> Credentials(const std::string& ca,
                                                        const std::string& client = "") const {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = pem(ca + ".pem");
    if (!client.empty()) {
      options.pem_private_key = pem(client + ".key");
      options.pem_cert_chain = pem(client + ".pem");
    }
    return grpc::SslCredentials(options);
  }

 private:
  static bool Run(const std::string& command) {
    return std::system(absl::StrCat(command, " >/dev/null 2>&1").c_str()) == 0;
  }
  bool MakeCa(const std::string& name, const std::string& key) const {
    return Run(absl::StrCat("cd ", dir_.string(), " && openssl req -x509 ", key, " -keyout ", name,
                            ".key -out ", name, ".pem -days 2 -subj /CN=", name));
  }
  bool MakeLeaf(const std::string& name, const std::string& ca, const std::string& key) const {
    const bool server = name.ends_with("server");
    const std::string ext = server ? "server.ext" : "client.ext";
    return Run(absl::StrCat("cd ", dir_.string(), " && openssl req ", key, " -keyout ", name,
                            ".key -out ", name,
                            ".csr -subj /CN=", server ? "localhost" : name,
                            " && openssl x509 -req -in ", name, ".csr -CA ", ca, ".pem -CAkey ", ca,
                            ".key -CAcreateserial -days 2 -extfile ", ext, " -out ", name, ".pem"));
  }

  fs::path dir_;
  bool ok_ = false;
};

grpc::Status Live(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  inference::ServerLiveRequest request;
  inference::ServerLiveResponse response;
  grpc::Status s = stub->ServerLive(&context, request, &response);
  if (s.ok() && !response.live()) return grpc::Status(grpc::StatusCode::INTERNAL, "not live");
  return s;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // An HTTPS client refused after its handshake (mutual TLS 1.3 checks the client's
    // certificate then) writes its request into a closed socket: an error, not an exit.
    signal(SIGPIPE, SIG_IGN);
    if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "the openssl CLI is not installed";
    }
    ASSERT_TRUE(pki_.ok()) << "openssl could not make the test certificates";
  }
  Pki pki_;
};

TEST_F(TlsTest, InferencePortServesTlsOnly) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> started = DaemonProcess::Start(
      {"--grpc_tls_cert=" + pki_.path("server.pem"), "--grpc_tls_key=" + pki_.path("server.key")},
      std::chrono::seconds(120), pki_.Credentials("ca"));
  ASSERT_TRUE(started.ok()) << started.status();
  DaemonProcess& daemon = **started;
  EXPECT_THAT(daemon.Log(),
              ::testing::HasSubstr("(port " + std::to_string(daemon.grpc_port()) + ", TLS)"));

  // A TLS client that trusts the CA: served, inference included.
  absl::StatusOr<ReferenceCase> c = ReadReferenceCase("mlp");
  ASSERT_TRUE(c.ok()) << c.status();
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    inference::ModelInferResponse response;
    grpc::Status s = daemon.Inference()->ModelInfer(&context, RequestFor("mlp", *c), &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.outputs_size(), 1);
  }
  // Plain text against the TLS port, and TLS trusting another CA: no connection.
  grpc::Status plain = Live(LoopbackChannel(daemon.grpc_port()));
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << plain.error_message();
  grpc::Status wrong_ca = Live(LoopbackChannel(daemon.grpc_port(), pki_.Credentials("other_ca")));
  EXPECT_EQ(wrong_ca.error_code(), grpc::StatusCode::UNAVAILABLE) << wrong_ca.error_message();

  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(std::chrono::seconds(30)), 0) << daemon.Log();
}

TEST_F(TlsTest, MutualTlsRefusesClientsWithoutATrustedCertificate) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> started = DaemonProcess::Start(
      {"--grpc_tls_cert=" + pki_.path("server.pem"), "--grpc_tls_key=" + pki_.path("server.key"),
       "--grpc_tls_client_ca=" + pki_.path("ca.pem")},
      std::chrono::seconds(120), pki_.Credentials("ca", "client"));
  ASSERT_TRUE(started.ok()) << started.status();
  DaemonProcess& daemon = **started;
  EXPECT_THAT(daemon.Log(), ::testing::HasSubstr("mutual TLS"));

  EXPECT_TRUE(Live(LoopbackChannel(daemon.grpc_port(), pki_.Credentials("ca", "client"))).ok());
  grpc::Status no_cert = Live(LoopbackChannel(daemon.grpc_port(), pki_.Credentials("ca")));
  EXPECT_EQ(no_cert.error_code(), grpc::StatusCode::UNAVAILABLE) << no_cert.error_message();
  grpc::Status foreign =
      Live(LoopbackChannel(daemon.grpc_port(), pki_.Credentials("ca", "other_client")));
  EXPECT_EQ(foreign.error_code(), grpc::StatusCode::UNAVAILABLE) << foreign.error_message();
  EXPECT_FALSE(Live(LoopbackChannel(daemon.grpc_port())).ok());
}

TEST_F(TlsTest, AdminPortWithMutualTlsAndToken) {
  const std::string token_file = pki_.path("admin.token");
  std::ofstream(token_file) << "t0ken\n";
  absl::StatusOr<std::unique_ptr<DaemonProcess>> started = DaemonProcess::Start(
      {"--admin_tls_cert=" + pki_.path("server.pem"), "--admin_tls_key=" + pki_.path("server.key"),
       "--admin_tls_client_ca=" + pki_.path("ca.pem"), "--admin_token_file=" + token_file});
  ASSERT_TRUE(started.ok()) << started.status();
  DaemonProcess& daemon = **started;

  auto status = [&](const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
    auto admin =
        ndserve::admin::v1::MemoryAdmin::NewStub(LoopbackChannel(daemon.admin_port(), credentials));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    context.AddMetadata("authorization", "Bearer t0ken");
    ndserve::admin::v1::GetMemoryStatusRequest request;
    request.set_device_id(-1);
    ndserve::admin::v1::MemoryStatus response;
    return admin->GetMemoryStatus(&context, request, &response);
  };
  grpc::Status good = status(pki_.Credentials("ca", "client"));
  EXPECT_TRUE(good.ok()) << good.error_message();
  EXPECT_EQ(status(nullptr).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status(pki_.Credentials("ca")).error_code(), grpc::StatusCode::UNAVAILABLE);
  // The inference port stays plain text.
  EXPECT_TRUE(Live(LoopbackChannel(daemon.grpc_port())).ok());
}

// Replaces `to` with a copy of `from` in one rename, as a secret mount or cert-manager
// does, so that the daemon never reads half a file.
void ReplaceFile(const std::string& from, const std::string& to) {
  const std::string staged = to + ".new";
  fs::copy_file(from, staged, fs::copy_options::overwrite_existing);
  fs::rename(staged, to);
}

TEST_F(TlsTest, ARotatedCertificateIsServedWithoutARestart) {
  const std::string cert = pki_.path("live.pem"), key = pki_.path("live.key");
  ReplaceFile(pki_.path("server.pem"), cert);
  ReplaceFile(pki_.path("server.key"), key);
  absl::StatusOr<std::unique_ptr<DaemonProcess>> started = DaemonProcess::Start(
      {"--grpc_tls_cert=" + cert, "--grpc_tls_key=" + key, "--tls_reload_seconds=1"},
      std::chrono::seconds(120), pki_.Credentials("ca"));
  ASSERT_TRUE(started.ok()) << started.status();
  DaemonProcess& daemon = **started;
  EXPECT_TRUE(Live(LoopbackChannel(daemon.grpc_port(), pki_.Credentials("ca"))).ok());
  EXPECT_FALSE(Live(LoopbackChannel(daemon.grpc_port(), pki_.Credentials("other_ca"))).ok());

  // Rotate to a certificate another CA signed: key first, as the pair is only used once
  // both match.
  ReplaceFile(pki_.path("other_server.key"), key);
  ReplaceFile(pki_.path("other_server.pem"), cert);
  // A new handshake sees the new certificate within a reload period or two; the limit is
  // a hang guard.
  bool rotated = false;
  for (int i = 0; i < 300 && !rotated; ++i) {
    rotated = Live(LoopbackChannel(daemon.grpc_port(), pki_.Credentials("other_ca"))).ok();
    if (!rotated) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(rotated) << "the new certificate was never served\n" << daemon.Log();
  EXPECT_FALSE(Live(LoopbackChannel(daemon.grpc_port(), pki_.Credentials("ca"))).ok())
      << "the old certificate is still served";
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(std::chrono::seconds(30)), 0) << daemon.Log();
}

// HTTPS requests to the daemon's HTTP port, trusting `ca` and presenting `client` (e.g.
// "client") when not empty.
struct Https {
  Https(const Pki& pki, int port, const std::string& ca, const std::string& client = "")
      : owned(client.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
                             : std::make_unique<httplib::SSLClient>(
                                   "127.0.0.1", port, pki.path(client + ".pem"),
                                   pki.path(client + ".key"))),
        cli(*owned) {
    cli.set_ca_cert_path(pki.path(ca + ".pem").c_str());
    cli.enable_server_certificate_verification(true);
    cli.set_connection_timeout(10);
    cli.set_read_timeout(30);
  }
  // The status of GET /v2/health/ready; -1 when no HTTP exchange happened (the TLS
  // handshake failed).
  int Ready() {
    httplib::Result r = cli.Get("/v2/health/ready");
    return r ? r->status : -1;
  }
  std::unique_ptr<httplib::SSLClient> owned;
  httplib::SSLClient& cli;
};

// A binary-extension infer request for the mlp reference case over `cli`; the response.
httplib::Result InferMlp(httplib::ClientImpl& cli) {
  absl::StatusOr<ReferenceCase> c = ReadReferenceCase("mlp");
  if (!c.ok()) return httplib::Result(nullptr, httplib::Error::Unknown);
  std::string header = R"({"inputs":[)";
  std::string blobs;
  for (size_t i = 0; i < c->inputs.size(); ++i) {
    const CaseTensor& t = c->inputs[i];
    std::string shape;
    for (int64_t d : t.shape) absl::StrAppend(&shape, shape.empty() ? "" : ",", d);
    absl::StrAppend(&header, i == 0 ? "" : ",", R"({"name":")", t.name, R"(","datatype":")",
                    t.datatype, R"(","shape":[)", shape,
                    R"(],"parameters":{"binary_data_size":)", t.bytes.size(), "}}");
    blobs += t.bytes;
  }
  header += "]}";
  httplib::Headers headers = {
      {"Inference-Header-Content-Length", std::to_string(header.size())}};
  return cli.Post("/v2/models/mlp/infer", headers, header + blobs, "application/octet-stream");
}

TEST_F(TlsTest, HttpPortServesHttpsOnly) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> started = DaemonProcess::Start(
      {DaemonProcess::kServeHttp, "--http_tls_cert=" + pki_.path("server.pem"),
       "--http_tls_key=" + pki_.path("server.key")});
  ASSERT_TRUE(started.ok()) << started.status();
  DaemonProcess& daemon = **started;
  EXPECT_THAT(daemon.Log(), ::testing::HasSubstr(absl::StrCat(daemon.http_port(), " (TLS)")));

  // A client that trusts the CA: served, inference included.
  Https good(pki_, daemon.http_port(), "ca");
  EXPECT_EQ(good.Ready(), 200);
  httplib::Result infer = InferMlp(good.cli);
  ASSERT_TRUE(infer) << httplib::to_string(infer.error());
  EXPECT_EQ(infer->status, 200) << infer->body;
  EXPECT_THAT(infer->body, ::testing::HasSubstr(R"("outputs")"));
  // Plain HTTP gets no reply, and a client trusting another CA refuses the server.
  httplib::Client plain("127.0.0.1", daemon.http_port());
  plain.set_read_timeout(10);
  httplib::Result plain_ready = plain.Get("/v2/health/ready");
  EXPECT_TRUE(!plain_ready || plain_ready->status != 200);
  Https foreign(pki_, daemon.http_port(), "other_ca");
  EXPECT_EQ(foreign.Ready(), -1);
  // The daemon serves on after those.
  EXPECT_EQ(Https(pki_, daemon.http_port(), "ca").Ready(), 200);

  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(std::chrono::seconds(30)), 0) << daemon.Log();
}

TEST_F(TlsTest, HttpMutualTlsRefusesClientsWithoutATrustedCertificate) {
  absl::StatusOr<std::unique_ptr<DaemonProcess>> started = DaemonProcess::Start(
      {DaemonProcess::kServeHttp, "--http_tls_cert=" + pki_.path("server.pem"),
       "--http_tls_key=" + pki_.path("server.key"),
       "--http_tls_client_ca=" + pki_.path("ca.pem")});
  ASSERT_TRUE(started.ok()) << started.status();
  DaemonProcess& daemon = **started;
  EXPECT_THAT(daemon.Log(),
              ::testing::HasSubstr(absl::StrCat(daemon.http_port(), " (mutual TLS)")));

  Https with_cert(pki_, daemon.http_port(), "ca", "client");
  EXPECT_EQ(with_cert.Ready(), 200);
  httplib::Result infer = InferMlp(with_cert.cli);
  ASSERT_TRUE(infer) << httplib::to_string(infer.error());
  EXPECT_EQ(infer->status, 200) << infer->body;
  EXPECT_EQ(Https(pki_, daemon.http_port(), "ca").Ready(), -1);
  EXPECT_EQ(Https(pki_, daemon.http_port(), "ca", "other_client").Ready(), -1);
  // The gRPC port stays plain text.
  EXPECT_TRUE(Live(LoopbackChannel(daemon.grpc_port())).ok());
}

TEST_F(TlsTest, HttpServesARotatedCertificateWithoutARestart) {
  const std::string cert = pki_.path("http.pem"), key = pki_.path("http.key");
  ReplaceFile(pki_.path("server.pem"), cert);
  ReplaceFile(pki_.path("server.key"), key);
  absl::StatusOr<std::unique_ptr<DaemonProcess>> started = DaemonProcess::Start(
      {DaemonProcess::kServeHttp, "--http_tls_cert=" + cert, "--http_tls_key=" + key,
       "--tls_reload_seconds=1"});
  ASSERT_TRUE(started.ok()) << started.status();
  DaemonProcess& daemon = **started;
  EXPECT_EQ(Https(pki_, daemon.http_port(), "ca").Ready(), 200);
  EXPECT_EQ(Https(pki_, daemon.http_port(), "other_ca").Ready(), -1);

  // A key replaced before its certificate: until both match, handshakes keep the old pair
  // (the reload is refused and logged).
  ReplaceFile(pki_.path("other_server.key"), key);
  bool refused = false;
  for (int i = 0; i < 300 && !refused; ++i) {
    refused = absl::StrContains(daemon.Log(), "HTTP TLS reload failed");
    if (!refused) {
      EXPECT_EQ(Https(pki_, daemon.http_port(), "ca").Ready(), 200);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_TRUE(refused) << daemon.Log();
  EXPECT_EQ(Https(pki_, daemon.http_port(), "ca").Ready(), 200);
  ReplaceFile(pki_.path("other_server.pem"), cert);
  // A new handshake sees the new pair within a reload period or two; the limit is a hang
  // guard.
  bool rotated = false;
  for (int i = 0; i < 300 && !rotated; ++i) {
    rotated = Https(pki_, daemon.http_port(), "other_ca").Ready() == 200;
    if (!rotated) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(rotated) << "the new certificate was never served\n" << daemon.Log();
  EXPECT_EQ(Https(pki_, daemon.http_port(), "ca").Ready(), -1) << "the old certificate is still served";
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(std::chrono::seconds(30)), 0) << daemon.Log();
}

}  // namespace
}  // namespace ndserve::testing
