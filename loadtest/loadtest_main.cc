// ndserve-loadtest: an async gRPC load generator for KServe v2 ModelInfer.
//
//   ndserve-loadtest --model=mlp --batch=1 --concurrency=64 --duration_s=20
//   ndserve-loadtest --model=recsys --batch=16 --rate=2000 --requests=100000
//   ndserve-loadtest --model=mlp --soak --daemon_pid=$(pidof ndserved)
//   ndserve-loadtest --address=127.0.0.1:9001 --model=echo --input=input:FP32:-1x64
//   ndserve-loadtest --protocol=http --address=127.0.0.1:8000 --http_format=json --model=mlp
//
// Closed loop keeps --concurrency requests outstanding; open loop (--rate) sends on a
// fixed schedule. Inputs are random tensors of the model's shapes, asked of ModelMetadata
// unless --input gives them (-1 as the first dimension is the batch). Before and after
// the run it reads the daemon's pools (MemoryAdmin.GetMemoryStatus, or /metrics) and
// checks that allocated bytes did not grow: every request's memory must be freed when
// it ends. --soak sends a million requests and samples memory every 10,000 while the
// daemon is quiescent, checking allocated bytes stay flat and RSS grows under 1%.
//
// The only place that knows about flags: they are bound into LoadtestOptions here, and
// PlanLoadtest (loadtest_options.h) turns those into the run; everything below takes that.
//
// Exit status: 0 all checks passed, 1 a check failed, 2 the run could not be made.
#include <grpcpp/grpcpp.h>
#include <httplib.h>

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
#include "loadtest/http_body.h"
#include "loadtest/http_load_driver.h"
#include "loadtest/load_driver.h"
#include "loadtest/loadtest_options.h"
#include "loadtest/memory_probe.h"
#include "loadtest/report.h"
#include "loadtest/tensor_spec.h"
#include "proto/health.grpc.pb.h"
#include "proto/inference.grpc.pb.h"

ABSL_FLAG(std::string, address, "127.0.0.1:8001", "Inference address (GRPCInferenceService).");
ABSL_FLAG(std::string, protocol, "grpc",
          "grpc, or http: KServe v2 HTTP/REST at --address (one keep-alive connection per "
          "--concurrency, also with --rate).");
ABSL_FLAG(std::string, http_format, "binary",
          "--protocol=http bodies: binary (the binary tensor data extension) or json.");
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

// Every flag, read once; nothing below reads flags.
LoadtestOptions OptionsFromFlags() {
  LoadtestOptions o;
  o.address = absl::GetFlag(FLAGS_address);
  o.protocol = absl::GetFlag(FLAGS_protocol);
  o.http_format = absl::GetFlag(FLAGS_http_format);
  o.model = absl::GetFlag(FLAGS_model);
  o.model_version = absl::GetFlag(FLAGS_model_version);
  o.batch = absl::GetFlag(FLAGS_batch);
  o.input = absl::GetFlag(FLAGS_input);
  o.variable_dim = absl::GetFlag(FLAGS_variable_dim);
  o.concurrency = absl::GetFlag(FLAGS_concurrency);
  o.rate = absl::GetFlag(FLAGS_rate);
  o.duration_s = absl::GetFlag(FLAGS_duration_s);
  o.requests = absl::GetFlag(FLAGS_requests);
  o.warmup_s = absl::GetFlag(FLAGS_warmup_s);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.channels = absl::GetFlag(FLAGS_channels);
  o.timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  o.max_outstanding = absl::GetFlag(FLAGS_max_outstanding);
  o.distinct_inputs = absl::GetFlag(FLAGS_distinct_inputs);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.int_max = absl::GetFlag(FLAGS_int_max);
  o.bytes_length = absl::GetFlag(FLAGS_bytes_length);
  o.validate_every = absl::GetFlag(FLAGS_validate_every);
  o.admin_address = absl::GetFlag(FLAGS_admin_address);
  o.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  o.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  o.daemon_pid = absl::GetFlag(FLAGS_daemon_pid);
  o.settle_ms = absl::GetFlag(FLAGS_settle_ms);
  o.leak_tolerance_bytes = absl::GetFlag(FLAGS_leak_tolerance_bytes);
  o.max_error_rate = absl::GetFlag(FLAGS_max_error_rate);
  o.soak = absl::GetFlag(FLAGS_soak);
  o.sample_every = absl::GetFlag(FLAGS_sample_every);
  o.max_rss_growth_pct = absl::GetFlag(FLAGS_max_rss_growth_pct);
  o.json_out = absl::GetFlag(FLAGS_json_out);
  o.samples_out = absl::GetFlag(FLAGS_samples_out);
  o.wait_ready_s = absl::GetFlag(FLAGS_wait_ready_s);
  return o;
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
// one that has neither but answers is taken as ready (a minimal server).
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

absl::StatusOr<std::vector<inference::ModelInferRequest>> BuildRequests(
    const std::vector<TensorSpec>& specs, const LoadtestOptions& options) {
  RandomOptions random;
  random.int_max = options.int_max;
  random.bytes_length = options.bytes_length;
  std::mt19937_64 rng(options.seed);
  std::vector<inference::ModelInferRequest> out;
  for (int i = 0; i < std::max(1, options.distinct_inputs); ++i) {
    inference::ModelInferRequest request;
    request.set_model_name(options.model);
    request.set_model_version(options.model_version);
    for (const TensorSpec& spec : specs) {
      auto* input = request.add_inputs();
      input->set_name(spec.name);
      input->set_datatype(spec.datatype);
      for (std::int64_t d : spec.shape) input->add_shape(d);
      absl::StatusOr<std::string> bytes = RandomTensorBytes(spec, random, rng);
      if (!bytes.ok()) return bytes.status();
      request.add_raw_input_contents(*std::move(bytes));
    }
    out.push_back(std::move(request));
  }
  return out;
}

// --protocol=http: the model's inputs from GET /v2/models/<model>, and readiness from
// GET /v2/health/ready.
absl::StatusOr<std::vector<TensorSpec>> InputsFromHttp(const std::string& address,
                                                       const LoadtestOptions& o) {
  httplib::Client client(absl::StrCat("http://", address));
  client.set_read_timeout(std::chrono::seconds(10));
  httplib::Result reply = client.Get(HttpModelPath(o.model, o.model_version));
  if (!reply) return absl::UnavailableError(absl::StrCat("cannot reach http://", address));
  if (reply->status != 200) {
    return absl::UnavailableError(absl::StrCat("GET ", HttpModelPath(o.model, o.model_version),
                                               ": HTTP ", reply->status, " ", reply->body));
  }
  return InputsFromHttpMetadata(reply->body);
}

absl::Status WaitReadyHttp(const std::string& address, absl::Duration wait) {
  httplib::Client client(absl::StrCat("http://", address));
  client.set_connection_timeout(std::chrono::seconds(2));
  client.set_read_timeout(std::chrono::seconds(2));
  const absl::Time deadline = absl::Now() + wait;
  while (absl::Now() < deadline) {
    httplib::Result reply = client.Get("/v2/health/ready");
    if (reply && reply->status == 200) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::UnavailableError(
      absl::StrCat("server not ready after ", absl::FormatDuration(wait)));
}

// A source named explicitly must work; one chosen by 'auto' is dropped with a note when
// it doesn't answer (the echo server has no admin listener and no /metrics).
struct ProbeSetup {
  std::unique_ptr<MemoryProbe> probe;
  std::vector<std::string> notes;
};

absl::StatusOr<ProbeSetup> SetUpProbe(const LoadtestPlan& plan) {
  MemoryProbeOptions options;
  const bool admin_auto = plan.admin_auto;
  const bool metrics_auto = plan.metrics_auto;
  options.admin_address = plan.admin_address;
  options.admin_token_file = plan.options.admin_token_file;
  options.metrics_address = plan.metrics_address;
  options.pid = plan.options.daemon_pid;

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

// The request inputs with their shapes resolved for --batch: --input's, else the
// model's own from ModelMetadata.
absl::StatusOr<std::vector<TensorSpec>> ResolveInputs(const LoadtestPlan& plan,
                                                      inference::GRPCInferenceService::Stub& stub) {
  const LoadtestOptions& o = plan.options;
  std::vector<TensorSpec> specs = plan.inputs;
  if (specs.empty()) {
    absl::StatusOr<std::vector<TensorSpec>> from_server =
        o.protocol == "http" ? InputsFromHttp(o.address, o)
                             : InputsFromMetadata(stub, o.model, o.model_version);
    if (!from_server.ok()) return from_server.status();
    specs = *std::move(from_server);
  }
  for (TensorSpec& spec : specs) {
    if (o.batch > 1 && (spec.shape.empty() || spec.shape[0] != -1)) {
      LOG(WARNING) << "input " << spec.name << " " << FormatShape(spec.shape)
                   << " has no variable batch dimension; --batch=" << o.batch
                   << " is ignored for it";
    }
    absl::StatusOr<TensorSpec> resolved = ResolveShape(spec, o.batch, o.variable_dim);
    if (!resolved.ok()) return resolved.status();
    spec = *std::move(resolved);
  }
  return specs;
}

LoadOptions MakeLoadOptions(const LoadtestPlan& plan, std::vector<std::string> requests) {
  LoadOptions options;
  options.address = plan.options.address;
  options.requests = std::move(requests);
  options.concurrency = plan.options.concurrency;
  options.rate = plan.options.rate;
  options.threads = plan.threads;
  options.channels = plan.channels;
  options.timeout = absl::Milliseconds(plan.options.timeout_ms);
  options.max_outstanding = plan.options.max_outstanding;
  options.validate_every = plan.options.validate_every;
  return options;
}

Report StartReport(const LoadtestPlan& plan, const LoadOptions& load,
                   const std::vector<TensorSpec>& specs, const ProbeSetup& probe_setup) {
  Report report;
  report.address = plan.options.address;
  report.model = plan.options.model;
  report.model_version = plan.options.model_version;
  report.batch = plan.options.batch;
  report.mode = load.rate > 0 ? "open" : "closed";
  if (plan.options.protocol == "http") {
    report.mode = absl::StrCat(report.mode, ", http ", plan.options.http_format);
  }
  // Over HTTP an open loop still runs on --concurrency connections, which bound it.
  report.concurrency =
      load.rate > 0 && plan.options.protocol != "http" ? 0 : load.concurrency;
  report.rate = load.rate;
  report.threads = load.threads;
  report.channels = load.channels;
  std::vector<std::string> described;
  for (const TensorSpec& spec : specs) {
    described.push_back(absl::StrCat(spec.name, ":", spec.datatype, FormatShape(spec.shape)));
  }
  report.inputs = absl::StrJoin(described, ", ");
  report.memory_unavailable = absl::StrJoin(probe_setup.notes, "; ");
  return report;
}

// The pass/fail checks of a finished run: errors always; with the daemon's pools, no
// growth of allocated bytes; with samples, allocated bytes flat and RSS growth bounded.
void AddChecks(const LoadtestPlan& plan, const MemoryProbe* probe, const std::string& sample_error,
               Report* report) {
  const LoadtestOptions& o = plan.options;
  const LoadResult& res = report->result;
  const double error_rate =
      res.sent > 0 ? static_cast<double>(res.error_count()) / static_cast<double>(res.sent) : 1.0;
  report->checks.push_back(
      {"errors", res.ok > 0 && error_rate <= o.max_error_rate,
       absl::StrFormat("%d of %d failed, %.4f%% (allowed %.4f%%)", res.error_count(), res.sent,
                       100 * error_rate, 100 * o.max_error_rate)});
  const std::int64_t tolerance = o.leak_tolerance_bytes;
  if (report->before && report->after && probe->has_pools()) {
    const MemorySnapshot& before = *report->before;
    const MemorySnapshot& after = *report->after;
    auto delta = [](std::uint64_t to, std::uint64_t from) {
      return static_cast<std::int64_t>(to) - static_cast<std::int64_t>(from);
    };
    const std::int64_t allocated = delta(after.allocated_bytes(), before.allocated_bytes());
    report->checks.push_back(
        {"leak", allocated <= tolerance,
         absl::StrCat("allocated ", FormatSignedBytes(allocated), " across the run, cached ",
                      FormatSignedBytes(delta(after.cached_bytes(), before.cached_bytes())),
                      ", reserved ",
                      FormatSignedBytes(delta(after.reserved_bytes(), before.reserved_bytes())),
                      "; allowed ", FormatSignedBytes(tolerance))});
  }
  if (plan.sample_every <= 0 || probe == nullptr) return;
  if (!sample_error.empty()) report->checks.push_back({"samples", false, sample_error});
  std::vector<const MemorySnapshot*> all;
  if (report->before) all.push_back(&*report->before);
  for (const MemorySample& s : report->samples) all.push_back(&s.memory);
  if (report->after) all.push_back(&*report->after);
  if (probe->has_pools() && !all.empty()) {
    auto [lo, hi] = std::minmax_element(all.begin(), all.end(), [](auto* a, auto* b) {
      return a->allocated_bytes() < b->allocated_bytes();
    });
    const auto spread =
        static_cast<std::int64_t>((*hi)->allocated_bytes() - (*lo)->allocated_bytes());
    report->checks.push_back(
        {"allocated_flat", spread <= tolerance,
         absl::StrCat(all.size(), " samples between ", FormatBytes((*lo)->allocated_bytes()),
                      " and ", FormatBytes((*hi)->allocated_bytes()), "; allowed spread ",
                      FormatBytes(static_cast<double>(tolerance)))});
  }
  // The baseline is the first sample taken under load, not the idle read before it:
  // the first requests at full concurrency size gRPC's buffers and malloc's arenas
  // once, which is not growth.
  const MemorySnapshot* base = report->samples.empty() ? nullptr : &report->samples[0].memory;
  if (probe->has_rss() && base != nullptr && base->rss_bytes && report->after &&
      report->after->rss_bytes) {
    std::uint64_t peak = 0;
    for (const MemorySnapshot* m : all) peak = std::max(peak, m->rss_bytes.value_or(0));
    const double growth =
        100.0 *
        (static_cast<double>(*report->after->rss_bytes) - static_cast<double>(*base->rss_bytes)) /
        static_cast<double>(*base->rss_bytes);
    const double allowed = o.max_rss_growth_pct;
    report->checks.push_back(
        {"rss_growth", growth < allowed,
         absl::StrFormat("%s after %d requests -> %s at the end (%+.3f%%, peak %s); allowed "
                         "%.2f%%",
                         FormatBytes(*base->rss_bytes), report->samples[0].requests,
                         FormatBytes(*report->after->rss_bytes), growth, FormatBytes(peak),
                         allowed)});
  }
}

void WriteReport(const LoadtestOptions& options, const Report& report) {
  PrintText(report, std::cout);
  if (!options.json_out.empty()) {
    std::ofstream out(options.json_out);
    PrintJson(report, out);
    if (!out) std::cerr << "ndserve-loadtest: cannot write " << options.json_out << "\n";
  }
  if (!options.samples_out.empty()) {
    std::ofstream out(options.samples_out);
    PrintSamplesCsv(report, out);
    if (!out) std::cerr << "ndserve-loadtest: cannot write " << options.samples_out << "\n";
  }
}

int SetupFailed(absl::string_view what, const absl::Status& status) {
  std::cerr << "ndserve-loadtest: " << what << status.message() << "\n";
  return kExitSetup;
}

int Run(const LoadtestPlan& plan) {
  const LoadtestOptions& o = plan.options;
  const std::shared_ptr<grpc::Channel> channel = Channel(o.address);
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  const bool http = o.protocol == "http";
  if (o.wait_ready_s > 0) {
    if (absl::Status s = http ? WaitReadyHttp(o.address, absl::Seconds(o.wait_ready_s))
                              : WaitReady(channel, absl::Seconds(o.wait_ready_s));
        !s.ok()) {
      return SetupFailed(absl::StrCat(o.address, ": "), s);
    }
  }
  absl::StatusOr<std::vector<TensorSpec>> specs = ResolveInputs(plan, *stub);
  if (!specs.ok()) return SetupFailed("", specs.status());
  absl::StatusOr<std::vector<inference::ModelInferRequest>> requests = BuildRequests(*specs, o);
  if (!requests.ok()) return SetupFailed("", requests.status());
  std::vector<std::string> serialized;
  std::vector<HttpInferBody> bodies;
  for (const inference::ModelInferRequest& r : *requests) {
    if (!http) {
      serialized.push_back(r.SerializeAsString());
      continue;
    }
    absl::StatusOr<HttpInferBody> body = HttpInferBodyFor(
        r, o.http_format == "json" ? HttpFormat::kJson : HttpFormat::kBinary);
    if (!body.ok()) return SetupFailed("", body.status());
    bodies.push_back(*std::move(body));
  }
  const std::string infer_path = absl::StrCat(HttpModelPath(o.model, o.model_version), "/infer");
  auto run_load = [&](const LoadOptions& load) {
    return http ? RunHttpLoad(load, infer_path, bodies) : RunLoad(load);
  };

  absl::StatusOr<ProbeSetup> probe_setup = SetUpProbe(plan);
  if (!probe_setup.ok()) return SetupFailed("memory source: ", probe_setup.status());
  MemoryProbe* probe = probe_setup->probe.get();
  if (o.soak && (probe == nullptr || !probe->has_pools())) {
    std::cerr << "ndserve-loadtest: --soak needs the daemon's pools: give --admin_address or "
                 "--metrics_address\n";
    return kExitSetup;
  }

  LoadOptions options = MakeLoadOptions(plan, std::move(serialized));
  if (o.warmup_s > 0) {
    LoadOptions w = options;
    w.duration = absl::Seconds(o.warmup_s);
    w.max_requests = 0;
    if (absl::StatusOr<LoadResult> warm = run_load(w); !warm.ok()) {
      return SetupFailed("warm-up: ", warm.status());
    }
  }

  Report report = StartReport(plan, options, *specs, *probe_setup);
  const absl::Duration settle = absl::Milliseconds(o.settle_ms);
  std::string sample_error;
  if (probe != nullptr) {
    absl::StatusOr<MemorySnapshot> before = TakeSettled(*probe, settle);
    if (!before.ok()) return SetupFailed("memory before the run: ", before.status());
    report.before = *std::move(before);
    report.memory_source = probe->Describe();
    if (plan.sample_every > 0) {
      options.pause_every = plan.sample_every;
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
  options.duration = absl::Seconds(plan.duration_s);
  options.max_requests = plan.max_requests;
  absl::StatusOr<LoadResult> result = run_load(options);
  if (!result.ok()) return SetupFailed("", result.status());
  report.result = *std::move(result);
  if (probe != nullptr) {
    absl::StatusOr<MemorySnapshot> after = TakeSettled(*probe, settle);
    if (after.ok()) {
      report.after = *std::move(after);
    } else {
      report.checks.push_back({"memory", false, std::string(after.status().message())});
    }
  }

  AddChecks(plan, probe, sample_error, &report);
  WriteReport(o, report);
  return report.passed() ? EXIT_SUCCESS : kExitCheckFailed;
}

}  // namespace
}  // namespace ndserve::loadtest

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ndserve-loadtest --model=NAME [--batch=N] [--concurrency=N | --rate=R] "
      "[--duration_s=S | --requests=N] [--soak]: load test a KServe v2 ModelInfer endpoint.");
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<ndserve::loadtest::LoadtestPlan> plan = ndserve::loadtest::PlanLoadtest(
      ndserve::loadtest::OptionsFromFlags(), std::thread::hardware_concurrency());
  if (!plan.ok()) {
    std::cerr << "ndserve-loadtest: " << plan.status().message() << "\n";
    return ndserve::loadtest::kExitSetup;
  }
  return ndserve::loadtest::Run(*plan);
}
