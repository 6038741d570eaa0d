#ifndef NDSERVE_LOADTEST_LOAD_DRIVER_H_
#define NDSERVE_LOADTEST_LOAD_DRIVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "loadtest/latency_histogram.h"

namespace ndserve::loadtest {

// One load run against a GRPCInferenceService.
struct LoadOptions {
  std::string address;
  // Serialized ModelInferRequests, sent in rotation. Pre-serialized so that the client
  // spends its CPU on the transport, as a real client with a ready tensor would, and the
  // echo baseline and the daemon pay the same client cost.
  std::vector<std::string> requests;
  // Closed loop (rate == 0): this many requests are outstanding at all times.
  int concurrency = 1;
  // Open loop: requests per second, on a fixed schedule; latency counts from the
  // scheduled send time, so a stalled server cannot hide its queueing (no coordinated
  // omission).
  double rate = 0;
  // Stop issuing after this long (not counting pauses) or this many requests; zero: no
  // limit of that kind. At least one must be set.
  absl::Duration duration = absl::ZeroDuration();
  std::int64_t max_requests = 0;
  // Client threads, one completion queue each; channels (HTTP/2 connections) are spread
  // over them round-robin.
  int threads = 1;
  int channels = 1;
  absl::Duration timeout = absl::Seconds(10);
  // How long to wait for each connection before the run starts.
  absl::Duration connect_timeout = absl::Seconds(10);
  // Open loop: a scheduled request is counted as not sent instead of issued while this
  // many are in flight, so an overloaded server cannot make the client grow unbounded.
  int max_outstanding = 10000;
  // > 0: after every pause_every requests, stop issuing, wait until all of them have
  // completed, call on_pause(completed) and go on. Soak sampling uses it to read the
  // daemon's memory while it is quiescent; pauses don't count towards elapsed time.
  std::int64_t pause_every = 0;
  std::function<void(std::int64_t completed)> on_pause;
  // Parse the first response of each thread and every Nth after (0: only the first) and
  // check it carries outputs; a response that doesn't counts as error INVALID_RESPONSE.
  std::int64_t validate_every = 1000;
};

struct LoadResult {
  std::int64_t sent = 0;
  std::int64_t ok = 0;
  // Open loop only: scheduled requests skipped because max_outstanding were in flight.
  std::int64_t not_sent = 0;
  // gRPC status code name (or INVALID_RESPONSE) -> count.
  std::map<std::string, std::int64_t> errors;
  // Latency of successful requests.
  LatencyHistogram latency;
  // Latency of failed ones (a refusal under overload should be fast).
  LatencyHistogram error_latency;
  // Wall time of the run without pauses.
  absl::Duration elapsed;
  absl::Duration paused;
  std::int64_t request_bytes = 0;
  std::int64_t response_bytes = 0;

  std::int64_t error_count() const;
};

// Runs one load run to its end and returns what it measured. Blocks the calling thread,
// which also runs on_pause. Fails only when the address cannot be reached or the options
// are inconsistent; failing requests are counted, not returned.
absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options);

// "OK", "UNAVAILABLE", ... for a grpc::StatusCode value.
std::string GrpcCodeName(int code);

}  // namespace ndserve::loadtest

#endif  // NDSERVE_LOADTEST_LOAD_DRIVER_H_
