#ifndef NDSERVE_LOADTEST_LOADTEST_OPTIONS_H_
#define NDSERVE_LOADTEST_LOADTEST_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/tensor_spec.h"

namespace ndserve::loadtest {

// ndserve-loadtest's settings as the operator wrote them: loadtest_main.cc binds its
// flags into this struct and nothing else reads flags. Defaults are the flags' defaults.
// Plain value.
struct LoadtestOptions {
  std::string address = "127.0.0.1:8001";
  // "grpc" or "http" (KServe v2 HTTP/REST at --address, one keep-alive connection per
  // --concurrency, closed or open loop); for http,
  // "binary" (the binary tensor data extension) or "json" bodies.
  std::string protocol = "grpc";
  std::string http_format = "binary";
  std::string model;          // required
  std::string model_version;  // empty: the server's choice
  int batch = 1;
  // NAME:DATATYPE:DIMS texts; empty: the inputs come from ModelMetadata.
  std::vector<std::string> input;
  int variable_dim = 1;
  int concurrency = 1;
  double rate = 0;  // open loop when > 0
  double duration_s = 0;
  std::int64_t requests = 0;
  double warmup_s = 1;
  int threads = 0;   // 0: min(4, CPUs)
  int channels = 0;  // 0: one per thread
  int timeout_ms = 10000;
  int max_outstanding = 10000;
  int distinct_inputs = 16;
  std::uint64_t seed = 1;
  std::int64_t int_max = 1000;
  int bytes_length = 16;
  std::int64_t validate_every = 1000;
  std::string admin_address = "auto";
  std::string admin_token_file;
  std::string metrics_address = "auto";
  int daemon_pid = 0;
  int settle_ms = 2000;
  std::int64_t leak_tolerance_bytes = 0;
  double max_error_rate = 0;
  bool soak = false;
  std::int64_t sample_every = 0;
  double max_rss_growth_pct = 1.0;
  std::string json_out;
  std::string samples_out;
  double wait_ready_s = 0;
};

// What a run needs, derived from LoadtestOptions once and checked.
struct LoadtestPlan {
  LoadtestOptions options;
  // The parsed --input specs, before batch resolution (empty: ask ModelMetadata).
  std::vector<TensorSpec> inputs;
  // Limits after the soak and 10-second defaults: at least one of them is set.
  std::int64_t max_requests = 0;
  double duration_s = 0;
  std::int64_t sample_every = 0;
  // Client threads and HTTP/2 connections, resolved against `hardware_threads`.
  int threads = 1;
  int channels = 1;
  // Memory sources; "auto" resolved against --address's host (then *_auto is set, and a
  // source that does not answer is dropped with a note instead of failing the run).
  std::string admin_address;
  bool admin_auto = false;
  std::string metrics_address;
  bool metrics_auto = false;
};

// Applies the defaults (--soak: a million requests sampled every 10,000 unless told
// otherwise; neither --requests nor --duration_s: 10 s), resolves threads, channels and
// the "auto" memory sources, and parses --input. INVALID_ARGUMENT naming the flag for a
// missing --model, a --batch or --concurrency below 1, a negative --rate, a bad --input,
// an unknown --protocol or --http_format, or --protocol=http with soak sampling. `hardware_threads` is std::thread::hardware_concurrency() (0 if unknown).
absl::StatusOr<LoadtestPlan> PlanLoadtest(const LoadtestOptions& options,
                                          unsigned hardware_threads);

// The host part of "host:port" or "[v6]:port" ("" for ":port").
std::string AddressHost(const std::string& address);

}  // namespace ndserve::loadtest

#endif  // NDSERVE_LOADTEST_LOADTEST_OPTIONS_H_
