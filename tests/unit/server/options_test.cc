#include "server/options.h"

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/parallel_spin.h"
#include "memory/cuda_runtime.h"

namespace ndserve {
namespace {

using ::testing::HasSubstr;

// A fake environment, so tests never depend on (or change) the real one.
EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

const EnvLookup kEmptyEnv = FakeEnv({});

// A file named after `name`, this process and a counter: test binaries run in parallel
// (ctest -j) and must never read each other's half-written files.
std::string WriteTempFile(const std::string& name, const std::string& contents) {
  static std::atomic<int> counter{0};
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      absl::StrCat(getpid(), "_", counter.fetch_add(1), "_", name);
  std::ofstream(path) << contents;
  return path.string();
}

TEST(OptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateOptions(Options{}, kEmptyEnv).ok());
  absl::StatusOr<MemoryConfig> config = ResolveMemoryConfig(Options{}, kEmptyEnv);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->pool, PoolKind::kBinned);
  EXPECT_TRUE(config->limit.unlimited);
  EXPECT_EQ(config->debug_level, 0);
  EXPECT_EQ(config->thread_cache_bytes, kDefaultThreadCacheBytes);
}

TEST(OptionsTest, ThreadCacheFromEnvironmentOrFlag) {
  const EnvLookup env = FakeEnv({{"NDSERVE_MEMORY_THREAD_CACHE", "1MiB"}});
  EXPECT_EQ(ResolveMemoryConfig(Options{}, env)->thread_cache_bytes, 1u << 20);
  Options flags;
  flags.memory_thread_cache = "off";
  EXPECT_EQ(ResolveMemoryConfig(flags, env)->thread_cache_bytes, 0u);
  flags.memory_thread_cache = "huge";
  EXPECT_THAT(ValidateOptions(flags, env).message(), HasSubstr("--memory_thread_cache='huge'"));
  EXPECT_THAT(
      ValidateOptions(Options{}, FakeEnv({{"NDSERVE_MEMORY_THREAD_CACHE", "-3"}})).message(),
      HasSubstr("NDSERVE_MEMORY_THREAD_CACHE"));
}

TEST(OptionsTest, IntraOpSpinFromFlagThenEnvironmentThenDefault) {
  EXPECT_EQ(*ResolveIntraOpSpinMicros(Options{}, kEmptyEnv), kernels::cpu::kDefaultParallelSpinMicros);
  // An empty variable keeps the default, as the memory variables do.
  EXPECT_EQ(*ResolveIntraOpSpinMicros(Options{}, FakeEnv({{kIntraOpSpinEnv, ""}})),
            kernels::cpu::kDefaultParallelSpinMicros);
  const EnvLookup env = FakeEnv({{kIntraOpSpinEnv, "0"}});
  EXPECT_EQ(*ResolveIntraOpSpinMicros(Options{}, env), 0);
  Options flags;
  flags.intra_op_spin_us = "50";
  EXPECT_EQ(*ResolveIntraOpSpinMicros(flags, env), 50);
  flags.intra_op_spin_us = std::to_string(kernels::cpu::kMaxParallelSpinMicros);
  EXPECT_EQ(*ResolveIntraOpSpinMicros(flags, env), kernels::cpu::kMaxParallelSpinMicros);
  EXPECT_TRUE(ValidateOptions(flags, env).ok());
}

TEST(OptionsTest, BadIntraOpSpinNamesItsSource) {
  for (const char* bad : {"-1", "fast", "1.5", "100001", "99999999999"}) {
    Options flags;
    flags.intra_op_spin_us = bad;
    EXPECT_THAT(ValidateOptions(flags, kEmptyEnv).message(),
                HasSubstr(absl::StrCat("--intra_op_spin_us='", bad, "'")));
    EXPECT_THAT(ValidateOptions(Options{}, FakeEnv({{kIntraOpSpinEnv, bad}})).message(),
                HasSubstr(absl::StrCat("NDSERVE_INTRA_OP_SPIN_US='", bad, "'")));
  }
  // A good flag hides a bad variable.
  Options flags;
  flags.intra_op_spin_us = "0";
  EXPECT_TRUE(ValidateOptions(flags, FakeEnv({{kIntraOpSpinEnv, "fast"}})).ok());
}

TEST(OptionsTest, InferWorkerSpinFromFlagThenEnvironmentThenTheDevicesDefault) {
  EXPECT_EQ(*ResolveInferWorkerSpinMicros(Options{}, Device::Cpu(), kEmptyEnv), 0);
  EXPECT_EQ(*ResolveInferWorkerSpinMicros(Options{}, Device::Cuda(0), kEmptyEnv),
            kGpuInferWorkerSpinMicros);
  const EnvLookup env = FakeEnv({{kInferWorkerSpinEnv, "300"}});
  EXPECT_EQ(*ResolveInferWorkerSpinMicros(Options{}, Device::Cuda(0), env), 300);
  Options flags;
  flags.infer_worker_spin_us = "0";
  EXPECT_EQ(*ResolveInferWorkerSpinMicros(flags, Device::Cuda(0), env), 0);
  flags.infer_worker_spin_us = std::to_string(kMaxInferWorkerSpinMicros);
  EXPECT_EQ(*ResolveInferWorkerSpinMicros(flags, Device::Cpu(), env), kMaxInferWorkerSpinMicros);
  EXPECT_TRUE(ValidateOptions(flags, env).ok());
  for (const char* bad : {"-1", "soon", "10001"}) {
    flags.infer_worker_spin_us = bad;
    EXPECT_THAT(ValidateOptions(flags, kEmptyEnv).message(),
                HasSubstr(absl::StrCat("--infer_worker_spin_us='", bad, "'")));
    EXPECT_THAT(ValidateOptions(Options{}, FakeEnv({{kInferWorkerSpinEnv, bad}})).message(),
                HasSubstr(absl::StrCat("NDSERVE_INFER_WORKER_SPIN_US='", bad, "'")));
  }
}

TEST(OptionsTest, EnvironmentGivesDefaultsAndFlagsOverride) {
  const EnvLookup env = FakeEnv({{"NDSERVE_MEMORY_POOL", "split"},
                                 {"NDSERVE_MEMORY_LIMIT", "1GiB"},
                                 {"NDSERVE_DEBUG_LEVEL", "2"}});
  absl::StatusOr<MemoryConfig> from_env = ResolveMemoryConfig(Options{}, env);
  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_EQ(from_env->pool, PoolKind::kSplit);
  EXPECT_EQ(from_env->limit.bytes, 1ull << 30);
  EXPECT_EQ(from_env->debug_level, 2);

  Options flags;
  flags.memory_pool = "simple";
  flags.memory_limit = "80%";
  flags.debug_level = "1";
  absl::StatusOr<MemoryConfig> from_flags = ResolveMemoryConfig(flags, env);
  ASSERT_TRUE(from_flags.ok()) << from_flags.status();
  EXPECT_EQ(from_flags->pool, PoolKind::kSimple);
  EXPECT_DOUBLE_EQ(from_flags->limit.fraction, 0.8);
  EXPECT_EQ(from_flags->debug_level, 1);
}

TEST(OptionsTest, BadFlagValueNamesTheFlag) {
  Options pool;
  pool.memory_pool = "buddy";
  EXPECT_THAT(ValidateOptions(pool, kEmptyEnv).message(), HasSubstr("--memory_pool='buddy'"));

  Options limit;
  limit.memory_limit = "lots";
  absl::Status s = ValidateOptions(limit, kEmptyEnv);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--memory_limit"));

  Options level;
  level.debug_level = "3";
  EXPECT_THAT(ValidateOptions(level, kEmptyEnv).message(), HasSubstr("--debug_level"));
}

TEST(OptionsTest, BadEnvironmentValueNamesTheVariable) {
  EXPECT_THAT(ValidateOptions(Options{}, FakeEnv({{"NDSERVE_MEMORY_POOL", "buddy"}})).message(),
              HasSubstr("NDSERVE_MEMORY_POOL"));
  EXPECT_THAT(ValidateOptions(Options{}, FakeEnv({{"NDSERVE_MEMORY_LIMIT", "-5GiB"}})).message(),
              HasSubstr("NDSERVE_MEMORY_LIMIT"));
  EXPECT_THAT(ValidateOptions(Options{}, FakeEnv({{"NDSERVE_DEBUG_LEVEL", "x"}})).message(),
              HasSubstr("NDSERVE_DEBUG_LEVEL"));
}

// The variables memory/ used to read itself: each bad value is INVALID_ARGUMENT naming
// the variable and quoting the text, through the same resolution the daemon uses.
TEST(OptionsTest, EachBadMemoryVariableIsNamedInItsError) {
  struct Case {
    const char* var;
    const char* value;
  } cases[] = {{kPoolEnv, "turbo"},         {kLimitEnv, "lots"},
               {kLimitEnv, "-3GiB"},        {kLimitEnv, "0"},
               {kLimitEnv, "150%"},         {kDebugLevelEnv, "3"},
               {kDebugLevelEnv, "verbose"}, {kThreadCacheEnv, "2GiB"},
               {kThreadCacheEnv, "50%"}};
  for (const Case& c : cases) {
    absl::StatusOr<MemoryConfig> config =
        ResolveMemoryConfig(Options{}, FakeEnv({{c.var, c.value}}));
    ASSERT_FALSE(config.ok()) << c.var << "=" << c.value;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(config.status().message(), HasSubstr(absl::StrCat(c.var, "='", c.value, "'")));
  }
}

TEST(OptionsTest, EveryMemoryVariableIsReadAndEmptyOnesKeepTheDefaults) {
  absl::StatusOr<MemoryConfig> config =
      ResolveMemoryConfig(Options{}, FakeEnv({{kPoolEnv, "none"},
                                              {kLimitEnv, "64MiB"},
                                              {kDebugLevelEnv, "1"},
                                              {kThreadCacheEnv, "256KiB"}}));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->pool, PoolKind::kNone);
  EXPECT_EQ(config->limit.Resolve(0), 64ull << 20);
  EXPECT_EQ(config->debug_level, 1);
  EXPECT_EQ(config->thread_cache_bytes, 256u << 10);

  absl::StatusOr<MemoryConfig> empty = ResolveMemoryConfig(
      Options{}, FakeEnv({{kPoolEnv, ""}, {kLimitEnv, ""}, {kDebugLevelEnv, ""}}));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->pool, PoolKind::kBinned);
  EXPECT_TRUE(empty->limit.unlimited);
  EXPECT_EQ(empty->debug_level, 0);
}

TEST(OptionsTest, EachMemoryFlagWinsOverItsVariable) {
  const EnvLookup bad_env = FakeEnv(
      {{kPoolEnv, "turbo"}, {kLimitEnv, "lots"}, {kDebugLevelEnv, "9"}, {kThreadCacheEnv, "huge"}});
  Options flags;
  flags.memory_pool = "split";
  flags.memory_limit = "1GiB";
  flags.debug_level = "2";
  flags.memory_thread_cache = "0";
  absl::StatusOr<MemoryConfig> config = ResolveMemoryConfig(flags, bad_env);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->pool, PoolKind::kSplit);
  EXPECT_EQ(config->limit.Resolve(0), 1ull << 30);
  EXPECT_EQ(config->debug_level, 2);
  EXPECT_EQ(config->thread_cache_bytes, 0u);
}

TEST(OptionsTest, GoodFlagHidesBadEnvironment) {
  Options flags;
  flags.memory_limit = "512MiB";
  EXPECT_TRUE(ValidateOptions(flags, FakeEnv({{"NDSERVE_MEMORY_LIMIT", "garbage"}})).ok());
}

TEST(OptionsTest, NonLoopbackAdminNeedsATokenFile) {
  Options o;
  o.admin_address = "0.0.0.0:8003";
  absl::Status s = ValidateOptions(o, kEmptyEnv);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--admin_address"));
  EXPECT_THAT(s.message(), HasSubstr("--admin_token_file"));

  o.admin_address = "[::]:8003";
  EXPECT_FALSE(ValidateOptions(o, kEmptyEnv).ok());
  o.admin_address = "10.1.2.3:8003";
  EXPECT_FALSE(ValidateOptions(o, kEmptyEnv).ok());

  o.admin_token_file = WriteTempFile("ndserve_options_test_token", "s3cret\n");
  EXPECT_TRUE(ValidateOptions(o, kEmptyEnv).message().find("--admin_token_file") ==
              std::string::npos);
}

// PEM-shaped files: validation reads the markers; the TLS integration test
// (tests/integration/tls_test.cc) uses real certificates.
TlsFiles FakeTlsFiles(bool client_ca) {
  TlsFiles files;
  files.cert = WriteTempFile("ndserve_options_test_cert.pem",
                             "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n");
  files.key = WriteTempFile("ndserve_options_test_key.pem",
                            "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n");
  if (client_ca) files.client_ca = files.cert;
  return files;
}

// The token is a bearer secret: beyond loopback it must travel inside TLS.
TEST(OptionsTest, NonLoopbackAdminTokenNeedsTls) {
  Options o;
  o.admin_address = "0.0.0.0:8003";
  o.admin_token_file = WriteTempFile("ndserve_options_test_token", "s3cret\n");
  absl::Status s = ValidateOptions(o, kEmptyEnv);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--admin_address"));
  EXPECT_THAT(s.message(), HasSubstr("--admin_tls_cert"));
  o.admin_tls = FakeTlsFiles(/*client_ca=*/false);
  EXPECT_TRUE(ValidateOptions(o, kEmptyEnv).ok()) << ValidateOptions(o, kEmptyEnv);
  o.admin_tls = FakeTlsFiles(/*client_ca=*/true);
  EXPECT_TRUE(ValidateOptions(o, kEmptyEnv).ok());
  // TLS alone is not enough: the token rule still holds.
  o.admin_token_file.clear();
  EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(), HasSubstr("--admin_token_file"));
}

TEST(OptionsTest, TlsFilesComeTogetherAndMustBePem) {
  for (const char* listener : {"grpc", "admin", "http"}) {
    SCOPED_TRACE(listener);
    Options o;
    TlsFiles& tls = std::string(listener) == "grpc"    ? o.grpc_tls
                    : std::string(listener) == "admin" ? o.admin_tls
                                                       : o.http_tls;
    tls = FakeTlsFiles(/*client_ca=*/true);
    EXPECT_TRUE(ValidateOptions(o, kEmptyEnv).ok());

    const TlsFiles good = tls;
    tls.key.clear();
    absl::Status s = ValidateOptions(o, kEmptyEnv);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("--", listener, "_tls_cert needs --", listener,
                                                    "_tls_key")));
    tls = good;
    tls.cert.clear();
    EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(),
                HasSubstr(absl::StrCat("--", listener, "_tls_key needs")));
    tls = TlsFiles{.client_ca = good.client_ca};
    EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(),
                HasSubstr(absl::StrCat("--", listener, "_tls_client_ca needs")));

    tls = good;
    tls.key = "/nonexistent/ndserve/key.pem";
    s = ValidateOptions(o, kEmptyEnv);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("--", listener, "_tls_key='")));
    EXPECT_THAT(s.message(), HasSubstr("cannot be read"));
    tls = good;
    tls.cert = good.key;  // a key where the certificate belongs
    EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(),
                HasSubstr("not a PEM file holding a CERTIFICATE"));
    tls = good;
    tls.client_ca = WriteTempFile("ndserve_options_test_not_pem", "hello\n");
    EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(),
                HasSubstr(absl::StrCat("--", listener, "_tls_client_ca='")));
  }
}

TEST(OptionsTest, HttpTlsNeedsTheHttpListener) {
  Options o;
  o.http_tls = FakeTlsFiles(/*client_ca=*/false);
  EXPECT_TRUE(ValidateOptions(o, kEmptyEnv).ok());
  o.http_address.clear();
  absl::Status s = ValidateOptions(o, kEmptyEnv);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--http_tls_cert"));
  EXPECT_THAT(s.message(), HasSubstr("--http_address is empty"));
}

TEST(OptionsTest, LoopbackAdminNeedsNoToken) {
  for (const char* address : {"127.0.0.1:8003", "127.0.0.2:0", "localhost:8003", "[::1]:8003",
                              "unix:/tmp/ndserve-admin.sock"}) {
    Options o;
    o.admin_address = address;
    EXPECT_TRUE(ValidateOptions(o, kEmptyEnv).ok()) << address;
  }
}

TEST(OptionsTest, EmptyOrMissingTokenFileIsAnError) {
  Options o;
  o.admin_token_file = WriteTempFile("ndserve_options_test_empty_token", "  \n");
  EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(), HasSubstr("--admin_token_file"));
  o.admin_token_file = "/nonexistent/ndserve/token";
  EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(), HasSubstr("--admin_token_file"));
}

TEST(OptionsTest, ReadAdminTokenStripsWhitespace) {
  absl::StatusOr<std::string> token =
      ReadAdminToken(WriteTempFile("ndserve_options_test_token2", "  abc123 \n"));
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(*token, "abc123");
}

// Before: a FIFO hung the start (open waited for a writer) and /dev/zero was read until
// memory ran out. Now both are refused at once, without reading.
TEST(OptionsTest, TokenFileMustBeASmallRegularFile) {
  const std::string fifo = (std::filesystem::temp_directory_path() /
                            absl::StrCat("ndserve_options_test_fifo_", getpid()))
                               .string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<std::string> token = ReadAdminToken(fifo);
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(token.status().message(), HasSubstr("not a regular file"));
  std::filesystem::remove(fifo);

  token = ReadAdminToken("/dev/zero");
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(token.status().message(), HasSubstr("--admin_token_file='/dev/zero'"));

  token = ReadAdminToken(WriteTempFile("ndserve_options_test_big_token",
                                       std::string(kMaxAdminTokenFileBytes + 1, 't')));
  EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(token.status().message(), HasSubstr("at most 4096"));
  // At the cap is fine.
  token = ReadAdminToken(
      WriteTempFile("ndserve_options_test_max_token", std::string(kMaxAdminTokenFileBytes, 't')));
  EXPECT_TRUE(token.ok()) << token.status();
}

TEST(OptionsTest, TokenFileReadableByOthersIsAcceptedWithAWarning) {
  const std::string path = WriteTempFile("ndserve_options_test_shared_token", "secret\n");
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  std::string warning;
  absl::StatusOr<std::string> token = ReadAdminToken(path, &warning);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "secret");
  EXPECT_THAT(warning, HasSubstr("0644"));
  EXPECT_THAT(warning, HasSubstr("chmod 600"));
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  token = ReadAdminToken(path, &warning);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(warning, "");
}

TEST(OptionsTest, HostBoundsParseAndNameTheirFlag) {
  Options o;
  absl::StatusOr<HostBounds> bounds = ResolveHostBounds(o);
  ASSERT_TRUE(bounds.ok()) << bounds.status();
  EXPECT_EQ(bounds->max_request_bytes, uint64_t{256} << 20);
  EXPECT_EQ(bounds->max_response_bytes, uint64_t{1} << 30);
  EXPECT_EQ(bounds->max_inflight_host_bytes, uint64_t{4} << 30);

  o.max_inflight_host_bytes = "none";
  o.max_request_bytes = "64KiB";
  bounds = ResolveHostBounds(o);
  ASSERT_TRUE(bounds.ok()) << bounds.status();
  EXPECT_EQ(bounds->max_inflight_host_bytes, 0u);
  EXPECT_EQ(bounds->max_request_bytes, 64u << 10);

  o = Options();
  o.max_request_bytes = "4GiB";  // gRPC keeps the limit in an int
  EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(), HasSubstr("--max_request_bytes"));
  o = Options();
  o.max_response_bytes = "50%";
  EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(), HasSubstr("--max_response_bytes"));
  o = Options();
  o.max_response_bytes = "none";
  EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(), HasSubstr("a size is required"));
  o = Options();
  o.max_inflight_host_bytes = "lots";
  EXPECT_THAT(ValidateOptions(o, kEmptyEnv).message(), HasSubstr("--max_inflight_host_bytes"));
}

TEST(OptionsTest, BadAddressesNameTheFlag) {
  struct Case {
    const char* address;
    const char* flag;
  };
  for (const Case& c : {Case{"nohostport", "--grpc_address"}, Case{":8001", "--grpc_address"},
                        Case{"0.0.0.0:99999", "--grpc_address"}, Case{"::1:8001", "--grpc_address"},
                        Case{"[::1]8001", "--grpc_address"}, Case{"0.0.0.0:x", "--metrics_address"},
                        Case{"unix:/tmp/m.sock", "--metrics_address"}}) {
    Options o;
    if (std::string(c.flag) == "--grpc_address") {
      o.grpc_address = c.address;
    } else {
      o.metrics_address = c.address;
    }
    absl::Status s = ValidateOptions(o, kEmptyEnv);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.address;
    EXPECT_THAT(s.message(), HasSubstr(c.flag)) << c.address;
  }
}

TEST(OptionsTest, ParsesListenAddresses) {
  absl::StatusOr<ListenAddress> v4 = ParseListenAddress("0.0.0.0:8001", "grpc_address");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "0.0.0.0");
  EXPECT_EQ(v4->port, 8001);
  EXPECT_FALSE(IsLoopback(*v4));
  absl::StatusOr<ListenAddress> v6 = ParseListenAddress("[::1]:0", "grpc_address");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_TRUE(IsLoopback(*v6));
}

TEST(OptionsTest, OtherChecks) {
  Options timeout;
  timeout.exit_timeout_seconds = -1;
  EXPECT_THAT(ValidateOptions(timeout, kEmptyEnv).message(), HasSubstr("--exit_timeout_seconds"));
  Options pending;
  pending.max_pending_infer = -1;
  EXPECT_THAT(ValidateOptions(pending, kEmptyEnv).message(), HasSubstr("--max_pending_infer"));
  pending.max_pending_infer = 0;  // no limit
  Options workers;
  workers.infer_workers = -1;
  EXPECT_THAT(ValidateOptions(workers, kEmptyEnv).message(), HasSubstr("--infer_workers"));
  workers.infer_workers = 5000;
  EXPECT_THAT(ValidateOptions(workers, kEmptyEnv).message(), HasSubstr("--infer_workers"));
  Options reload;
  reload.tls_reload_seconds = -1;
  EXPECT_THAT(ValidateOptions(reload, kEmptyEnv).message(), HasSubstr("--tls_reload_seconds"));
  EXPECT_TRUE(ValidateOptions(pending, kEmptyEnv).ok());

  Options device;
  device.device = "tpu:0";
  EXPECT_THAT(ValidateOptions(device, kEmptyEnv).message(), HasSubstr("--device"));

  Options repo;
  repo.model_repository = "/nonexistent/ndserve/models";
  EXPECT_THAT(ValidateOptions(repo, kEmptyEnv).message(), HasSubstr("--model_repository"));
  repo.model_repository = std::filesystem::temp_directory_path().string();
  EXPECT_TRUE(ValidateOptions(repo, kEmptyEnv).ok());
}

TEST(OptionsTest, ModelControlModeParsesAsAFlag) {
  ModelControlMode mode = ModelControlMode::kExplicit;
  std::string error;
  EXPECT_TRUE(AbslParseFlag("none", &mode, &error));
  EXPECT_EQ(mode, ModelControlMode::kNone);
  EXPECT_TRUE(AbslParseFlag("EXPLICIT", &mode, &error));
  EXPECT_EQ(mode, ModelControlMode::kExplicit);
  EXPECT_FALSE(AbslParseFlag("poll", &mode, &error));
  EXPECT_THAT(error, HasSubstr("explicit"));
  EXPECT_EQ(AbslUnparseFlag(ModelControlMode::kNone), "none");
}

TEST(OptionsTest, ResolvesDevices) {
  absl::StatusOr<Device> automatic = ResolveDevice("auto");
  ASSERT_TRUE(automatic.ok());
  EXPECT_EQ(*automatic, CudaDeviceCount() > 0 ? Device::Cuda(0) : Device::Cpu());
  absl::StatusOr<Device> cpu = ResolveDevice("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(*cpu, Device::Cpu());
  absl::StatusOr<Device> missing = ResolveDevice("cuda:64");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr("--device"));
  EXPECT_EQ(ResolveDevice("npu").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ndserve
