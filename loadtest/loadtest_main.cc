// ndserve-loadtest: an async gRPC load generator for KServe v2 ModelInfer.
//
//   ndserve-loadtest --model=mlp --batch=1 --concurrency=64 --duration_s=20
//   ndserve-loadtest --model=recsys --batch=16 --rate=2000 --requests=100000
//   ndserve-loadtest --model=mlp --soak --daemon_pid=$(pidof ndserved)
//   ndserve-loadtest --address=127.0.0.1:9001 --model=echo --input=input:FP32:-1x64
//
// Closed loop keeps --concurrency requests outstanding; open loop (--rate) sends on a
// fixed schedule. Inputs are random tensors of the model's shapes, asked of ModelMetadata
// unless --input gives them (-1 as the first dimension is the batch). Before and after
// the run it reads the daemon's pools (MemoryAdmin.GetMemoryStatus, or /metrics) and
// checks that allocated bytes did not grow: every request's memory must be freed when
// it ends. --soak sends a million requests and samples memory every 10,000 while the
// daemon is quiescent, checking allocated bytes stay flat and RSS grows under 1%.
//
// Exit status: 0 all checks passed, 1 a check failed, 2 the run could not be made.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/logging.h"
#include "loadtest/load_driver.h"
#include "loadtest/memory_probe.h"
#include "loadtest/report.h"
#include "loadtest/tensor_spec.h"
#include "proto/health.grpc.pb.h"
#include "proto/inference.grpc.pb.h"

ABSL_FLAG(std::string, address, "127.0.0.1:8001", "Inference address (GRPCInferenceService).");
ABSL_FLAG(std::string, model, "", "Model name (required).");
ABSL_FLAG(std::string, model_version, "", "Model version; empty for the server's choice.");
ABSL_FLAG(int, batch, 1, "Batch size: fills the first dimension when it is -1.");
ABSL_FLAG(std::vector<std::string>, input, {},
          "Inputs as NAME:DATATYPE:DIMS, comma-separated (e.g. input:FP32:-1x64); skips "
          "ModelMetadata. -1 as the first dimension is the batch size.");
ABSL_FLAG(int, variable_dim, 1, "Value for -1 dimensions other than the first.");
ABSL_FLAG(int, concurrency, 1, "Closed loop: requests outstanding at all times.");
ABSL_FLAG(double, rate, 0, "Open loop: requests per second on a fixed schedule (0: closed loop).");
ABSL_FLAG(double, duration_s, 0, "Run length in seconds (0: unbounded if --requests is set).");
ABSL_FLAG(int64_t, requests, 0,
          "Requests to send (0: unbounded if --duration_s is set). "
          "With neither, the run lasts 10 s.");
ABSL_FLAG(double, warmup_s, 1, "Unmeasured warm-up before the run, same load shape.");
ABSL_FLAG(int, threads, 0, "Client threads (completion queues); 0: min(4, CPUs).");
ABSL_FLAG(int, channels, 0, "HTTP/2 connections; 0: one per thread.");
ABSL_FLAG(int, timeout_ms, 10000, "Deadline of each request.");
ABSL_FLAG(int, max_outstanding, 10000, "Open loop: cap on requests in flight.");
ABSL_FLAG(int, distinct_inputs, 16, "Random requests generated and sent in rotation.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the random inputs.");
ABSL_FLAG(int64_t, int_max, 1000,
          "Integer inputs are uniform in [0, int_max) (ids must fit the embedding tables).");
ABSL_FLAG(int, bytes_length, 16, "Length of each BYTES element.");
ABSL_FLAG(int64_t, validate_every, 1000,
          "Parse every Nth response (and the first) and check it has outputs; 0: first only.");
ABSL_FLAG(std::string, admin_address, "auto",
          "MemoryAdmin address for the leak check; 'auto': <host>:8003 when --address is "
          "loopback; empty: don't read.");
ABSL_FLAG(std::string, admin_token_file, "", "File with the admin bearer token.");
ABSL_FLAG(std::string, metrics_address, "auto",
          "host:port of the daemon's /metrics (pools without admin access, RSS without a "
          "pid); 'auto': <host>:8002; empty: don't read.");
ABSL_FLAG(int, daemon_pid, 0, "pid of a local daemon: RSS from /proc/<pid>/status VmRSS.");
ABSL_FLAG(int, settle_ms, 2000,
          "Up to this long, re-read memory until allocated bytes stop changing.");
ABSL_FLAG(int64_t, leak_tolerance_bytes, 0, "Allowed growth of allocated bytes.");
ABSL_FLAG(double, max_error_rate, 0, "Allowed fraction of failed requests.");
ABSL_FLAG(bool, soak, false,
          "Soak: 1,000,000 requests (unless --requests), memory sampled every 10,000 "
          "(unless --sample_every); checks allocated flat and RSS growth.");
ABSL_FLAG(int64_t, sample_every, 0, "Pause and sample memory every N requests (0: never).");
ABSL_FLAG(double, max_rss_growth_pct, 1.0, "Soak: allowed RSS growth, first sample to last.");
ABSL_FLAG(std::string, json_out, "", "Also write the report as JSON to this file.");
ABSL_FLAG(std::string, samples_out, "", "Write the memory samples as CSV to this file.");
ABSL_FLAG(double, wait_ready_s, 0, "Wait up to this long for ServerReady before starting.");

namespace ndserve::loadtest {
namespace {

constexpr int kExitCheckFailed = 1;
constexpr int kExitSetup = 2;

std::string Host(const std::string& address) {
  if (!address.empty() && address.front() == '[') return address.substr(0, address.find(']') + 1);
  return address.substr(0, address.rfind(':'));
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host.empty();
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<grpc::ClientContext> Context(int seconds) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return context;
}

// KServe ServerReady first; a server without it is asked grpc.health.v1 readiness, and
// one that has neither but answers is taken as ready (the echo baseline before it grew
// ServerReady, or a minimal server).
absl::Status WaitReady(const std::shared_ptr<grpc::Channel>& channel, absl::Duration wait) {
  auto kserve = inference::GRPCInferenceService::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);
  const absl::Time deadline = absl::Now() + wait;
  std::string last = "no answer";
  while (true) {
    inference::ServerReadyResponse ready;
    grpc::Status s = kserve->ServerReady(Context(2).get(), {}, &ready);
    if (s.ok() && ready.ready()) return absl::OkStatus();
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      grpc::health::v1::HealthCheckRequest request;
      request.set_service("readiness");
      grpc::health::v1::HealthCheckResponse response;
      s = health->Check(Context(2).get(), request, &response);
      if (s.ok() && response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
        return absl::OkStatus();
      }
      if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) return absl::OkStatus();
    }
    last =
        s.ok() ? "not ready" : absl::StrCat(GrpcCodeName(s.error_code()), ": ", s.error_message());
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::UnavailableError(
      absl::StrCat("server not ready after ", absl::FormatDuration(wait), " (", last, ")"));
}

absl::StatusOr<std::vector<TensorSpec>> InputsFromMetadata(
    inference::GRPCInferenceService::Stub& stub, const std::string& model,
    const std::string& version) {
  inference::ModelMetadataRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelMetadataResponse response;
  const grpc::Status s = stub.ModelMetadata(Context(10).get(), request, &response);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("ModelMetadata(", model, "): ", s.error_message(),
                                               " (", GrpcCodeName(s.error_code()),
                                               "); pass --input to give the shapes"));
  }
  std::vector<TensorSpec> specs;
  for (const auto& t : response.inputs()) {
    specs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
  }
  if (specs.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("model ", model, " reports no inputs"));
  }
  return specs;
}

absl::StatusOr<std::vector<std::string>> BuildRequests(const std::vector<TensorSpec>& specs,
                                                       int count) {
  RandomOptions random;
  random.int_max = absl::GetFlag(FLAGS_int_max);
  random.bytes_length = absl::GetFlag(FLAGS_bytes_length);
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  std::vector<std::string> out;
  for (int i = 0; i < std::max(1, count); ++i) {
    inference::ModelInferRequest request;
    request.set_model_name(absl::GetFlag(FLAGS_model));
    request.set_model_version(absl::GetFlag(FLAGS_model_version));
    for (const TensorSpec& spec : specs) {
      auto* input = request.add_inputs();
      input->set_name(spec.name);
      input->set_datatype(spec.datatype);
      for (std::int64_t d : spec.shape) input->add_shape(d);
      absl::StatusOr<std::string> bytes = RandomTensorBytes(spec, random, rng);
      if (!bytes.ok()) return bytes.status();
      request.add_raw_input_contents(*std::move(bytes));
    }
    out.push_back(request.SerializeAsString());
  }
  return out;
}

// A source named explicitly must work; one chosen by 'auto' is dropped with a note when
// it doesn't answer (the echo server has no admin listener and no /metrics).
struct ProbeSetup {
  std::unique_ptr<MemoryProbe> probe;
  std::vector<std::string> notes;
};

absl::StatusOr<ProbeSetup> SetUpProbe(const std::string& address) {
  const std::string host = Host(address);
  MemoryProbeOptions options;
  bool admin_auto = false;
  bool metrics_auto = false;
  options.admin_address = absl::GetFlag(FLAGS_admin_address);
  if (options.admin_address == "auto") {
    admin_auto = true;
    options.admin_address =
        IsLoopback(host) ? absl::StrCat(host.empty() ? "127.0.0.1" : host, ":8003") : "";
  }
  options.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  if (options.metrics_address == "auto") {
    metrics_auto = true;
    options.metrics_address = absl::StrCat(host.empty() ? "127.0.0.1" : host, ":8002");
  }
  options.pid = absl::GetFlag(FLAGS_daemon_pid);

  ProbeSetup setup;
  auto try_source = [&](MemoryProbeOptions only, bool is_auto, std::string* field,
                        int* pid) -> absl::Status {
    absl::StatusOr<std::unique_ptr<MemoryProbe>> probe = MemoryProbe::Create(only);
    absl::Status s = probe.ok() ? (*probe)->Take().status() : probe.status();
    if (s.ok()) return s;
    if (!is_auto) return s;
    setup.notes.push_back(std::string(s.message()));
    if (field != nullptr) field->clear();
    if (pid != nullptr) *pid = 0;
    return absl::OkStatus();
  };
  if (!options.admin_address.empty()) {
    MemoryProbeOptions only;
    only.admin_address = options.admin_address;
    only.admin_token_file = options.admin_token_file;
    if (absl::Status s = try_source(only, admin_auto, &options.admin_address, nullptr); !s.ok()) {
      return s;
    }
  }
  if (!options.metrics_address.empty()) {
    MemoryProbeOptions only;
    only.metrics_address = options.metrics_address;
    if (absl::Status s = try_source(only, metrics_auto, &options.metrics_address, nullptr);
        !s.ok()) {
      return s;
    }
  }
  if (options.pid > 0) {
    MemoryProbeOptions only;
    only.pid = options.pid;
    if (absl::Status s = try_source(only, false, nullptr, &options.pid); !s.ok()) return s;
  }
  if (options.admin_address.empty() && options.metrics_address.empty() && options.pid <= 0) {
    return setup;
  }
  absl::StatusOr<std::unique_ptr<MemoryProbe>> probe = MemoryProbe::Create(options);
  if (!probe.ok()) return probe.status();
  setup.probe = *std::move(probe);
  return setup;
}

// Reads until allocated bytes and live blocks read the same twice in a row: a request's
// context may close just after its response left, so the first read after the client's
// last completion can still see it.
absl::StatusOr<MemorySnapshot> TakeSettled(MemoryProbe& probe, absl::Duration settle) {
  absl::StatusOr<MemorySnapshot> last = probe.Take();
  if (!last.ok() || !probe.has_pools()) return last;
  const absl::Time deadline = absl::Now() + settle;
  while (absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    absl::StatusOr<MemorySnapshot> next = probe.Take();
    if (!next.ok()) return next;
    auto outstanding = [](const MemorySnapshot& m) {
      std::uint64_t n = 0;
      for (const PoolMemory& p : m.pools) n += p.outstanding_allocations;
      return n;
    };
    const bool same = next->allocated_bytes() == last->allocated_bytes() &&
                      outstanding(*next) == outstanding(*last);
    last = std::move(next);
    if (same) break;
  }
  return last;
}

int Run() {
  const std::string address = absl::GetFlag(FLAGS_address);
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model.empty()) {
    std::cerr << "ndserve-loadtest: --model is required\n";
    return kExitSetup;
  }
  const int batch = absl::GetFlag(FLAGS_batch);
  const bool soak = absl::GetFlag(FLAGS_soak);
  std::int64_t max_requests = absl::GetFlag(FLAGS_requests);
  double duration_s = absl::GetFlag(FLAGS_duration_s);
  std::int64_t sample_every = absl::GetFlag(FLAGS_sample_every);
  if (soak) {
    if (max_requests <= 0 && duration_s <= 0) max_requests = 1'000'000;
    if (sample_every <= 0) sample_every = 10'000;
  }
  if (max_requests <= 0 && duration_s <= 0) duration_s = 10;
  if (batch < 1 || absl::GetFlag(FLAGS_concurrency) < 1 || absl::GetFlag(FLAGS_rate) < 0) {
    std::cerr << "ndserve-loadtest: --batch and --concurrency must be >= 1, --rate >= 0\n";
    return kExitSetup;
  }

  const std::shared_ptr<grpc::Channel> channel = Channel(address);
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  if (const double wait = absl::GetFlag(FLAGS_wait_ready_s); wait > 0) {
    if (absl::Status s = WaitReady(channel, absl::Seconds(wait)); !s.ok()) {
      std::cerr << "ndserve-loadtest: " << address << ": " << s.message() << "\n";
      return kExitSetup;
    }
  }

  std::vector<TensorSpec> specs;
  if (!absl::GetFlag(FLAGS_input).empty()) {
    for (const std::string& text : absl::GetFlag(FLAGS_input)) {
      absl::StatusOr<TensorSpec> spec = ParseTensorSpec(text);
      if (!spec.ok()) {
        std::cerr << "ndserve-loadtest: " << spec.status().message() << "\n";
        return kExitSetup;
      }
      specs.push_back(*std::move(spec));
    }
  } else {
    absl::StatusOr<std::vector<TensorSpec>> from_server =
        InputsFromMetadata(*stub, model, absl::GetFlag(FLAGS_model_version));
    if (!from_server.ok()) {
      std::cerr << "ndserve-loadtest: " << from_server.status().message() << "\n";
      return kExitSetup;
    }
    specs = *std::move(from_server);
  }
  std::vector<std::string> described;
  for (TensorSpec& spec : specs) {
    if (batch > 1 && (spec.shape.empty() || spec.shape[0] != -1)) {
      LOG(WARNING) << "input " << spec.name << " " << FormatShape(spec.shape)
                   << " has no variable batch dimension; --batch=" << batch << " is ignored for it";
    }
    absl::StatusOr<TensorSpec> resolved =
        ResolveShape(spec, batch, absl::GetFlag(FLAGS_variable_dim));
    if (!resolved.ok()) {
      std::cerr << "ndserve-loadtest: " << resolved.status().message() << "\n";
      return kExitSetup;
    }
    spec = *std::move(resolved);
    described.push_back(absl::StrCat(spec.name, ":", spec.datatype, FormatShape(spec.shape)));
  }
  absl::StatusOr<std::vector<std::string>> requests =
      BuildRequests(specs, absl::GetFlag(FLAGS_distinct_inputs));
  if (!requests.ok()) {
    std::cerr << "ndserve-loadtest: " << requests.status().message() << "\n";
    return kExitSetup;
  }

  absl::StatusOr<ProbeSetup> probe_setup = SetUpProbe(address);
  if (!probe_setup.ok()) {
    std::cerr << "ndserve-loadtest: memory source: " << probe_setup.status().message() << "\n";
    return kExitSetup;
  }
  MemoryProbe* probe = probe_setup->probe.get();
  if (soak && (probe == nullptr || !probe->has_pools())) {
    std::cerr << "ndserve-loadtest: --soak needs the daemon's pools: give --admin_address or "
                 "--metrics_address\n";
    return kExitSetup;
  }

  LoadOptions options;
  options.address = address;
  options.requests = *std::move(requests);
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.rate = absl::GetFlag(FLAGS_rate);
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) {
    threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  }
  options.threads = options.rate > 0 ? threads : std::min(threads, options.concurrency);
  options.channels = std::max(options.threads, absl::GetFlag(FLAGS_channels));
  options.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  options.max_outstanding = absl::GetFlag(FLAGS_max_outstanding);
  options.validate_every = absl::GetFlag(FLAGS_validate_every);

  if (const double warmup = absl::GetFlag(FLAGS_warmup_s); warmup > 0) {
    LoadOptions w = options;
    w.duration = absl::Seconds(warmup);
    w.max_requests = 0;
    absl::StatusOr<LoadResult> warm = RunLoad(w);
    if (!warm.ok()) {
      std::cerr << "ndserve-loadtest: warm-up: " << warm.status().message() << "\n";
      return kExitSetup;
    }
  }

  Report report;
  report.address = address;
  report.model = model;
  report.model_version = absl::GetFlag(FLAGS_model_version);
  report.batch = batch;
  report.mode = options.rate > 0 ? "open" : "closed";
  report.concurrency = options.rate > 0 ? 0 : options.concurrency;
  report.rate = options.rate;
  report.threads = options.threads;
  report.channels = options.channels;
  report.inputs = absl::StrJoin(described, ", ");
  report.memory_unavailable = absl::StrJoin(probe_setup->notes, "; ");

  const absl::Duration settle = absl::Milliseconds(absl::GetFlag(FLAGS_settle_ms));
  std::string sample_error;
  if (probe != nullptr) {
    absl::StatusOr<MemorySnapshot> before = TakeSettled(*probe, settle);
    if (!before.ok()) {
      std::cerr << "ndserve-loadtest: memory before the run: " << before.status().message() << "\n";
      return kExitSetup;
    }
    report.before = *std::move(before);
    report.memory_source = probe->Describe();
    if (sample_every > 0) {
      options.pause_every = sample_every;
      options.on_pause = [&](std::int64_t completed) {
        absl::StatusOr<MemorySnapshot> m = TakeSettled(*probe, settle);
        if (m.ok()) {
          report.samples.push_back({completed, *std::move(m)});
        } else if (sample_error.empty()) {
          sample_error = std::string(m.status().message());
        }
      };
    }
  }
  options.duration = absl::Seconds(duration_s);
  options.max_requests = max_requests;
  absl::StatusOr<LoadResult> result = RunLoad(options);
  if (!result.ok()) {
    std::cerr << "ndserve-loadtest: " << result.status().message() << "\n";
    return kExitSetup;
  }
  report.result = *std::move(result);
  if (probe != nullptr) {
    absl::StatusOr<MemorySnapshot> after = TakeSettled(*probe, settle);
    if (after.ok()) {
      report.after = *std::move(after);
    } else {
      report.checks.push_back({"memory", false, std::string(after.status().message())});
    }
  }

  // Checks.
  const LoadResult& res = report.result;
  const double error_rate =
      res.sent > 0 ? static_cast<double>(res.error_count()) / static_cast<double>(res.sent) : 1.0;
  report.checks.push_back(
      {"errors", res.ok > 0 && error_rate <= absl::GetFlag(FLAGS_max_error_rate),
       absl::StrFormat("%d of %d failed, %.4f%% (allowed %.4f%%)", res.error_count(), res.sent,
                       100 * error_rate, 100 * absl::GetFlag(FLAGS_max_error_rate))});
  const std::int64_t tolerance = absl::GetFlag(FLAGS_leak_tolerance_bytes);
  if (report.before && report.after && probe->has_pools()) {
    const std::int64_t delta = static_cast<std::int64_t>(report.after->allocated_bytes()) -
                               static_cast<std::int64_t>(report.before->allocated_bytes());
    report.checks.push_back(
        {"leak", delta <= tolerance,
         absl::StrCat("allocated ", FormatSignedBytes(delta), " across the run, cached ",
                      FormatSignedBytes(static_cast<std::int64_t>(report.after->cached_bytes()) -
                                        static_cast<std::int64_t>(report.before->cached_bytes())),
                      ", reserved ",
                      FormatSignedBytes(static_cast<std::int64_t>(report.after->reserved_bytes()) -
                                        static_cast<std::int64_t>(report.before->reserved_bytes())),
                      "; allowed ", FormatSignedBytes(tolerance))});
  }
  if (sample_every > 0 && probe != nullptr) {
    if (!sample_error.empty()) report.checks.push_back({"samples", false, sample_error});
    std::vector<const MemorySnapshot*> all;
    if (report.before) all.push_back(&*report.before);
    for (const MemorySample& s : report.samples) all.push_back(&s.memory);
    if (report.after) all.push_back(&*report.after);
    if (probe->has_pools() && !all.empty()) {
      auto [lo, hi] = std::minmax_element(all.begin(), all.end(), [](auto* a, auto* b) {
        return a->allocated_bytes() < b->allocated_bytes();
      });
      const auto spread =
          static_cast<std::int64_t>((*hi)->allocated_bytes() - (*lo)->allocated_bytes());
      report.checks.push_back(
          {"allocated_flat", spread <= tolerance,
           absl::StrCat(all.size(), " samples between ", FormatBytes((*lo)->allocated_bytes()),
                        " and ", FormatBytes((*hi)->allocated_bytes()), "; allowed spread ",
                        FormatBytes(static_cast<double>(tolerance)))});
    }
    // The baseline is the first sample taken under load, not the idle read before it:
    // the first requests at full concurrency size gRPC's buffers and malloc's arenas
    // once, which is not growth.
    const MemorySnapshot* base = report.samples.empty() ? nullptr : &report.samples[0].memory;
    if (probe->has_rss() && base != nullptr && base->rss_bytes && report.after &&
        report.after->rss_bytes) {
      std::uint64_t peak = 0;
      for (const MemorySnapshot* m : all) peak = std::max(peak, m->rss_bytes.value_or(0));
      const double growth =
          100.0 *
          (static_cast<double>(*report.after->rss_bytes) - static_cast<double>(*base->rss_bytes)) /
          static_cast<double>(*base->rss_bytes);
      const double allowed = absl::GetFlag(FLAGS_max_rss_growth_pct);
      report.checks.push_back(
          {"rss_growth", growth < allowed,
           absl::StrFormat("%s after %d requests -> %s at the end (%+.3f%%, peak %s); allowed "
                           "%.2f%%",
                           FormatBytes(*base->rss_bytes), report.samples[0].requests,
                           FormatBytes(*report.after->rss_bytes), growth, FormatBytes(peak),
                           allowed)});
    }
  }

  PrintText(report, std::cout);
  if (const std::string path = absl::GetFlag(FLAGS_json_out); !path.empty()) {
    std::ofstream out(path);
    PrintJson(report, out);
    if (!out) std::cerr << "ndserve-loadtest: cannot write " << path << "\n";
  }
  if (const std::string path = absl::GetFlag(FLAGS_samples_out); !path.empty()) {
    std::ofstream out(path);
    PrintSamplesCsv(report, out);
    if (!out) std::cerr << "ndserve-loadtest: cannot write " << path << "\n";
  }
  return report.passed() ? EXIT_SUCCESS : kExitCheckFailed;
}

}  // namespace
}  // namespace ndserve::loadtest

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ndserve-loadtest --model=NAME [--batch=N] [--concurrency=N | --rate=R] "
      "[--duration_s=S | --requests=N] [--soak]: load test a KServe v2 ModelInfer endpoint.");
  absl::ParseCommandLine(argc, argv);
  return ndserve::loadtest::Run();
}
