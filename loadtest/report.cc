#include "loadtest/report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ndserve::loadtest {
namespace {

std::string Millis(std::int64_t nanos) { return absl::StrFormat("%.3f ms", nanos / 1e6); }

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::int64_t Delta(std::uint64_t after, std::uint64_t before) {
  return static_cast<std::int64_t>(after) - static_cast<std::int64_t>(before);
}

double Seconds(const LoadResult& r) { return absl::ToDoubleSeconds(r.elapsed); }

double Throughput(const LoadResult& r) {
  const double s = Seconds(r);
  return s > 0 ? static_cast<double>(r.ok) / s : 0;
}

void JsonSnapshot(const MemorySnapshot& m, std::ostream& out) {
  out << "{\"allocated_bytes\":" << m.allocated_bytes() << ",\"cached_bytes\":" << m.cached_bytes()
      << ",\"reserved_bytes\":" << m.reserved_bytes();
  if (m.rss_bytes) out << ",\"rss_bytes\":" << *m.rss_bytes;
  out << ",\"pools\":[";
  for (size_t i = 0; i < m.pools.size(); ++i) {
    const PoolMemory& p = m.pools[i];
    out << (i ? "," : "") << "{\"device\":" << JsonString(p.device)
        << ",\"pool\":" << JsonString(p.pool) << ",\"allocated_bytes\":" << p.allocated_bytes
        << ",\"cached_bytes\":" << p.cached_bytes << ",\"reserved_bytes\":" << p.reserved_bytes
        << ",\"outstanding_allocations\":" << p.outstanding_allocations << "}";
  }
  out << "]}";
}

}  // namespace

bool Report::passed() const {
  return std::all_of(checks.begin(), checks.end(), [](const Check& c) { return c.passed; });
}

std::string FormatBytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double v = bytes;
  while (std::fabs(v) >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrFormat("%.0f B", v) : absl::StrFormat("%.3f %s", v, kUnits[unit]);
}

std::string FormatSignedBytes(std::int64_t bytes) {
  return absl::StrCat(bytes >= 0 ? "+" : "-", FormatBytes(std::fabs(static_cast<double>(bytes))));
}

void PrintText(const Report& r, std::ostream& out) {
  const LoadResult& res = r.result;
  out << "ndserve-loadtest: model " << r.model
      << (r.model_version.empty() ? "" : absl::StrCat(" version ", r.model_version)) << ", batch "
      << r.batch << ", at " << r.address << "\n";
  out << "  inputs: " << r.inputs << "\n";
  if (absl::StartsWith(r.mode, "open")) {
    out << absl::StrFormat("  open loop at %.1f req/s", r.rate);
  } else {
    out << "  closed loop, " << r.concurrency << " concurrent requests";
  }
  // An HTTP run has one blocking thread per keep-alive connection, --concurrency of each.
  if (const size_t http = r.mode.find("http"); http != std::string::npos) {
    out << ", " << r.mode.substr(http) << ", " << r.concurrency << " connections\n";
  } else {
    out << ", " << r.threads << " threads, " << r.channels << " connections\n";
  }
  const double seconds = Seconds(res);
  out << absl::StrFormat(
      "requests: %d sent, %d ok, %d errors in %.2f s%s\n", res.sent, res.ok, res.error_count(),
      seconds,
      res.paused > absl::ZeroDuration()
          ? absl::StrFormat(" (plus %.2f s of sampling pauses)", absl::ToDoubleSeconds(res.paused))
          : "");
  if (res.not_sent > 0) {
    out << "  not sent (client at max_outstanding): " << res.not_sent << "\n";
  }
  out << absl::StrFormat("throughput: %.1f req/s, %.1f inferences/s\n", Throughput(res),
                         Throughput(res) * r.batch);
  out << absl::StrFormat("bytes: %s sent, %s received\n", FormatBytes(res.request_bytes),
                         FormatBytes(res.response_bytes));
  const LatencyHistogram& l = res.latency;
  out << "latency (ok): mean " << Millis(static_cast<std::int64_t>(l.mean())) << ", p50 "
      << Millis(l.Percentile(0.5)) << ", p90 " << Millis(l.Percentile(0.9)) << ", p99 "
      << Millis(l.Percentile(0.99)) << ", p999 " << Millis(l.Percentile(0.999)) << ", max "
      << Millis(l.max()) << "\n";
  if (res.errors.empty()) {
    out << "errors by code: none\n";
  } else {
    out << "errors by code:";
    for (const auto& [code, count] : res.errors) out << " " << code << "=" << count;
    out << "\n";
    const LatencyHistogram& e = res.error_latency;
    if (e.count() > 0) {
      out << "latency (errors): p50 " << Millis(e.Percentile(0.5)) << ", p99 "
          << Millis(e.Percentile(0.99)) << ", max " << Millis(e.max()) << "\n";
    }
  }

  if (r.memory_source.empty()) {
    out << "memory: not read" << (r.memory_unavailable.empty() ? "" : " (") << r.memory_unavailable
        << (r.memory_unavailable.empty() ? "" : ")") << "\n";
  } else if (r.before && r.after) {
    out << "memory (" << r.memory_source << "), before -> after:\n";
    if (!r.memory_unavailable.empty()) out << "  (not read: " << r.memory_unavailable << ")\n";
    std::map<std::pair<std::string, std::string>, PoolMemory> before;
    for (const PoolMemory& p : r.before->pools) before[{p.device, p.pool}] = p;
    auto row = [&out](const std::string& what, std::uint64_t b, std::uint64_t a) {
      out << absl::StrFormat("    %-10s %14s -> %14s  (%s)\n", what, FormatBytes(b), FormatBytes(a),
                             FormatSignedBytes(Delta(a, b)));
    };
    for (const PoolMemory& p : r.after->pools) {
      const PoolMemory b =
          before.count({p.device, p.pool}) ? before[{p.device, p.pool}] : PoolMemory{};
      out << "  pool '" << p.pool << "' on " << p.device << ":\n";
      row("allocated", b.allocated_bytes, p.allocated_bytes);
      row("cached", b.cached_bytes, p.cached_bytes);
      row("reserved", b.reserved_bytes, p.reserved_bytes);
    }
    if (r.before->rss_bytes && r.after->rss_bytes) {
      out << "  process:\n";
      row("rss", *r.before->rss_bytes, *r.after->rss_bytes);
    }
  }
  if (!r.samples.empty()) {
    out << "soak samples (requests: allocated / cached / reserved / rss):\n";
    // Every sample in a short run, else about twenty evenly spaced plus the last.
    const size_t step = std::max<size_t>(1, r.samples.size() / 20);
    for (size_t i = 0; i < r.samples.size(); ++i) {
      if (i % step != 0 && i + 1 != r.samples.size()) continue;
      const MemorySnapshot& m = r.samples[i].memory;
      out << absl::StrFormat("  %9d: %s / %s / %s / %s\n", r.samples[i].requests,
                             FormatBytes(m.allocated_bytes()), FormatBytes(m.cached_bytes()),
                             FormatBytes(m.reserved_bytes()),
                             m.rss_bytes ? FormatBytes(*m.rss_bytes) : "-");
    }
  }
  for (const Check& c : r.checks) {
    out << "check " << c.name << ": " << (c.passed ? "PASS" : "FAIL") << " (" << c.detail << ")\n";
  }
}

void PrintJson(const Report& r, std::ostream& out) {
  const LoadResult& res = r.result;
  const LatencyHistogram& l = res.latency;
  out << "{\"address\":" << JsonString(r.address) << ",\"model\":" << JsonString(r.model)
      << ",\"model_version\":" << JsonString(r.model_version) << ",\"batch\":" << r.batch
      << ",\"mode\":" << JsonString(r.mode) << ",\"concurrency\":" << r.concurrency
      << ",\"rate\":" << r.rate << ",\"threads\":" << r.threads << ",\"channels\":" << r.channels
      << ",\"inputs\":" << JsonString(r.inputs) << ",\"sent\":" << res.sent << ",\"ok\":" << res.ok
      << ",\"errors\":" << res.error_count() << ",\"not_sent\":" << res.not_sent
      << absl::StrFormat(",\"elapsed_s\":%.6f,\"paused_s\":%.6f", Seconds(res),
                         absl::ToDoubleSeconds(res.paused))
      << absl::StrFormat(",\"throughput_rps\":%.3f,\"inferences_per_s\":%.3f", Throughput(res),
                         Throughput(res) * r.batch)
      << absl::StrFormat(
             ",\"latency_ms\":{\"mean\":%.6f,\"p50\":%.6f,\"p90\":%.6f,\"p99\":%.6f,"
             "\"p999\":%.6f,\"max\":%.6f}",
             l.mean() / 1e6, l.Percentile(0.5) / 1e6, l.Percentile(0.9) / 1e6,
             l.Percentile(0.99) / 1e6, l.Percentile(0.999) / 1e6, l.max() / 1e6)
      << absl::StrFormat(",\"error_latency_ms\":{\"p50\":%.6f,\"p99\":%.6f,\"max\":%.6f}",
                         res.error_latency.Percentile(0.5) / 1e6,
                         res.error_latency.Percentile(0.99) / 1e6, res.error_latency.max() / 1e6)
      << ",\"errors_by_code\":{";
  bool first = true;
  for (const auto& [code, count] : res.errors) {
    out << (first ? "" : ",") << JsonString(code) << ":" << count;
    first = false;
  }
  out << "},\"memory_source\":" << JsonString(r.memory_source);
  if (r.before && r.after) {
    out << ",\"memory_before\":";
    JsonSnapshot(*r.before, out);
    out << ",\"memory_after\":";
    JsonSnapshot(*r.after, out);
    out << ",\"allocated_delta_bytes\":"
        << Delta(r.after->allocated_bytes(), r.before->allocated_bytes())
        << ",\"cached_delta_bytes\":" << Delta(r.after->cached_bytes(), r.before->cached_bytes())
        << ",\"reserved_delta_bytes\":"
        << Delta(r.after->reserved_bytes(), r.before->reserved_bytes());
    if (r.before->rss_bytes && r.after->rss_bytes) {
      out << ",\"rss_delta_bytes\":" << Delta(*r.after->rss_bytes, *r.before->rss_bytes);
    }
  }
  out << ",\"samples\":[";
  for (size_t i = 0; i < r.samples.size(); ++i) {
    out << (i ? "," : "") << "{\"requests\":" << r.samples[i].requests << ",\"memory\":";
    JsonSnapshot(r.samples[i].memory, out);
    out << "}";
  }
  out << "],\"checks\":[";
  for (size_t i = 0; i < r.checks.size(); ++i) {
    const Check& c = r.checks[i];
    out << (i ? "," : "") << "{\"name\":" << JsonString(c.name)
        << ",\"passed\":" << (c.passed ? "true" : "false") << ",\"detail\":" << JsonString(c.detail)
        << "}";
  }
  out << "],\"passed\":" << (r.passed() ? "true" : "false") << "}\n";
}

void PrintSamplesCsv(const Report& r, std::ostream& out) {
  out << "requests,allocated_bytes,cached_bytes,reserved_bytes,rss_bytes\n";
  for (const MemorySample& s : r.samples) {
    out << s.requests << "," << s.memory.allocated_bytes() << "," << s.memory.cached_bytes() << ","
        << s.memory.reserved_bytes() << ","
        << (s.memory.rss_bytes ? absl::StrCat(*s.memory.rss_bytes) : "") << "\n";
  }
}

}  // namespace ndserve::loadtest
