#include "loadtest/loadtest_options.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ndserve::loadtest {
namespace {

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host.empty();
}

}  // namespace

std::string AddressHost(const std::string& address) {
  if (!address.empty() && address.front() == '[') return address.substr(0, address.find(']') + 1);
  return address.substr(0, address.rfind(':'));
}

absl::StatusOr<LoadtestPlan> PlanLoadtest(const LoadtestOptions& options,
                                          unsigned hardware_threads) {
  if (options.model.empty()) return absl::InvalidArgumentError("--model is required");
  if (options.batch < 1 || options.concurrency < 1 || options.rate < 0) {
    return absl::InvalidArgumentError("--batch and --concurrency must be >= 1, --rate >= 0");
  }
  if (options.protocol != "grpc" && options.protocol != "http") {
    return absl::InvalidArgumentError(
        absl::StrCat("--protocol=", options.protocol, ": expected grpc or http"));
  }
  if (options.http_format != "binary" && options.http_format != "json") {
    return absl::InvalidArgumentError(
        absl::StrCat("--http_format=", options.http_format, ": expected binary or json"));
  }
  if (options.protocol == "http" && (options.soak || options.sample_every > 0)) {
    return absl::InvalidArgumentError("--protocol=http does not pause: no --soak or --sample_every");
  }
  LoadtestPlan plan;
  plan.options = options;
  for (const std::string& text : options.input) {
    absl::StatusOr<TensorSpec> spec = ParseTensorSpec(text);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--input: ", spec.status().message()));
    }
    plan.inputs.push_back(*std::move(spec));
  }

  plan.max_requests = options.requests;
  plan.duration_s = options.duration_s;
  plan.sample_every = options.sample_every;
  if (options.soak) {
    if (plan.max_requests <= 0 && plan.duration_s <= 0) plan.max_requests = 1'000'000;
    if (plan.sample_every <= 0) plan.sample_every = 10'000;
  }
  if (plan.max_requests <= 0 && plan.duration_s <= 0) plan.duration_s = 10;

  int threads = options.threads;
  if (threads <= 0) threads = static_cast<int>(std::clamp(hardware_threads, 1u, 4u));
  // A closed loop never needs more threads than requests in flight.
  plan.threads = options.rate > 0 ? threads : std::min(threads, options.concurrency);
  plan.channels = std::max(plan.threads, options.channels);

  const std::string host = AddressHost(options.address);
  const std::string local_host = host.empty() ? "127.0.0.1" : host;
  plan.admin_address = options.admin_address;
  if (plan.admin_address == "auto") {
    // The admin listener is loopback-only unless the operator set a token up for it.
    plan.admin_auto = true;
    plan.admin_address = IsLoopback(host) ? absl::StrCat(local_host, ":8003") : "";
  }
  plan.metrics_address = options.metrics_address;
  if (plan.metrics_address == "auto") {
    plan.metrics_auto = true;
    plan.metrics_address = absl::StrCat(local_host, ":8002");
  }
  return plan;
}

}  // namespace ndserve::loadtest
