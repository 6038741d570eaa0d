#include "loadtest/http_load_driver.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "loadtest/loadtest_options.h"

namespace ndserve::loadtest {
namespace {

constexpr char kHeaderLength[] = "Inference-Header-Content-Length";

std::int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Target {
  std::string host;
  int port = 0;
};

absl::StatusOr<Target> ParseTarget(const std::string& address) {
  Target t;
  t.host = AddressHost(address);
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &t.port) ||
      t.port <= 0 || t.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--address=", address, ": expected host:port for --protocol=http"));
  }
  if (t.host.empty()) t.host = "127.0.0.1";
  return t;
}

std::unique_ptr<httplib::Client> Connect(const Target& target, const LoadOptions& options) {
  auto client = std::make_unique<httplib::Client>(target.host, target.port);
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);
  const auto timeout = absl::ToChronoMicroseconds(options.timeout);
  client->set_read_timeout(timeout);
  client->set_write_timeout(timeout);
  client->set_connection_timeout(absl::ToChronoMicroseconds(options.connect_timeout));
  return client;
}

// A 200 carries outputs: its JSON part names them.
bool Valid(const httplib::Response& response) {
  size_t json = response.body.size();
  if (response.has_header(kHeaderLength) &&
      (!absl::SimpleAtoi(response.get_header_value(kHeaderLength), &json) ||
       json > response.body.size())) {
    return false;
  }
  return absl::string_view(response.body).substr(0, json).find("\"outputs\":[{") !=
         absl::string_view::npos;
}

}  // namespace

absl::StatusOr<LoadResult> RunHttpLoad(const LoadOptions& options, const std::string& path,
                                       const std::vector<HttpInferBody>& bodies) {
  if (bodies.empty()) return absl::InvalidArgumentError("no requests to send");
  if (options.pause_every > 0) {
    return absl::InvalidArgumentError("--protocol=http does not pause (no --soak or --sample_every)");
  }
  if (options.duration <= absl::ZeroDuration() && options.max_requests <= 0) {
    return absl::InvalidArgumentError("a load run needs a duration or a request count");
  }
  if (options.concurrency <= 0) return absl::InvalidArgumentError("concurrency must be >= 1");
  absl::StatusOr<Target> target = ParseTarget(options.address);
  if (!target.ok()) return target.status();

  // Connections are opened (and checked) before the clock starts.
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (int i = 0; i < options.concurrency; ++i) {
    clients.push_back(Connect(*target, options));
    if (!clients.back()->Get("/v2/health/live")) {
      return absl::UnavailableError(absl::StrCat("cannot connect to http://", options.address));
    }
  }

  const std::int64_t total = options.max_requests > 0 ? options.max_requests : INT64_MAX;
  std::atomic<std::int64_t> claimed{0};
  const std::int64_t start = NowNanos();
  const std::int64_t end = options.duration > absl::ZeroDuration()
                               ? start + absl::ToInt64Nanoseconds(options.duration)
                               : INT64_MAX;
  std::vector<LoadResult> results(clients.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < clients.size(); ++i) {
    threads.emplace_back([&, i] {
      httplib::Client& client = *clients[i];
      LoadResult& r = results[i];
      size_t next = i % bodies.size();
      std::int64_t seen = 0;
      // `since` is when the request was due: its send time in a closed loop, its slot on
      // the schedule in an open one.
      auto send_one = [&](std::int64_t since) {
        const HttpInferBody& body = bodies[next];
        next = (next + 1) % bodies.size();
        httplib::Headers headers;
        const char* type = "application/json";
        if (body.json_bytes > 0) {
          headers.emplace(kHeaderLength, std::to_string(body.json_bytes));
          type = "application/octet-stream";
        }
        httplib::Result reply = client.Post(path, headers, body.body, type);
        const std::int64_t latency = NowNanos() - since;
        ++r.sent;
        r.request_bytes += static_cast<std::int64_t>(body.body.size());
        if (!reply) {
          ++r.errors["CONNECTION"];
          r.error_latency.Record(latency);
          return;
        }
        r.response_bytes += static_cast<std::int64_t>(reply->body.size());
        if (reply->status != 200) {
          ++r.errors[absl::StrCat("HTTP_", reply->status)];
          r.error_latency.Record(latency);
          return;
        }
        const std::int64_t n = seen++;
        const bool check = n == 0 || (options.validate_every > 0 && n % options.validate_every == 0);
        if (check && !Valid(*reply)) {
          ++r.errors["INVALID_RESPONSE"];
          return;
        }
        ++r.ok;
        r.latency.Record(latency);
      };
      if (options.rate <= 0) {
        while (NowNanos() < end && claimed.fetch_add(1, std::memory_order_relaxed) < total) {
          send_one(NowNanos());
        }
        return;
      }
      // Open loop: slot k is due at start + k / rate whatever the server does. A slot
      // whose connection is late waits and its wait counts in its latency (no coordinated
      // omission); past max_outstanding late slots, the next ones are not sent.
      const double interval = 1e9 / options.rate;
      for (;;) {
        const std::int64_t k = claimed.fetch_add(1, std::memory_order_relaxed);
        if (k >= total) return;
        const std::int64_t due = start + static_cast<std::int64_t>(k * interval);
        if (due >= end) return;
        const std::int64_t now = NowNanos();
        if (due > now) {
          std::this_thread::sleep_for(std::chrono::nanoseconds(due - now));
        } else if (static_cast<std::int64_t>((now - start) / interval) - k >
                   options.max_outstanding) {
          ++r.not_sent;
          continue;
        }
        send_one(due);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  LoadResult result;
  for (LoadResult& r : results) {
    result.sent += r.sent;
    result.ok += r.ok;
    result.not_sent += r.not_sent;
    for (const auto& [code, count] : r.errors) result.errors[code] += count;
    result.latency.Merge(r.latency);
    result.error_latency.Merge(r.error_latency);
    result.request_bytes += r.request_bytes;
    result.response_bytes += r.response_bytes;
  }
  result.elapsed = absl::Nanoseconds(NowNanos() - start);
  return result;
}

}  // namespace ndserve::loadtest
