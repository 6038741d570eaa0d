#include "loadtest/memory_probe.h"

#include <grpcpp/grpcpp.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "proto/admin.grpc.pb.h"

namespace ndserve::loadtest {
namespace {

constexpr int kTimeoutMs = 5000;

absl::StatusOr<std::uint64_t> ReadVmRss(int pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/status");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, "kB");
    std::uint64_t kib = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kib)) return kib * 1024;
  }
  return absl::InternalError(absl::StrCat("no VmRSS line in ", path));
}

// The value of label `key` in a Prometheus label set `{a="x",b="y"}`; label values the
// daemon writes (device and pool names) never contain escaped quotes.
std::string LabelValue(absl::string_view labels, absl::string_view key) {
  const std::string needle = absl::StrCat(key, "=\"");
  size_t at = 0;
  while ((at = labels.find(needle, at)) != absl::string_view::npos) {
    if (at == 0 || labels[at - 1] == '{' || labels[at - 1] == ',') {
      const size_t begin = at + needle.size();
      const size_t end = labels.find('"', begin);
      if (end == absl::string_view::npos) return "";
      return std::string(labels.substr(begin, end - begin));
    }
    at += needle.size();
  }
  return "";
}

class ProbeImpl final : public MemoryProbe {
 public:
  ProbeImpl(MemoryProbeOptions options, std::string token)
      : options_(std::move(options)), token_(std::move(token)) {
    if (!options_.admin_address.empty()) {
      grpc::ChannelArguments args;
      args.SetMaxReceiveMessageSize(-1);
      stub_ = ndserve::admin::v1::MemoryAdmin::NewStub(grpc::CreateCustomChannel(
          options_.admin_address, grpc::InsecureChannelCredentials(), args));
    }
  }

  bool has_pools() const override { return stub_ != nullptr || !options_.metrics_address.empty(); }
  bool has_rss() const override { return options_.pid > 0 || !options_.metrics_address.empty(); }

  std::string Describe() const override {
    std::vector<std::string> parts;
    if (stub_ != nullptr) {
      parts.push_back(absl::StrCat("MemoryAdmin ", options_.admin_address));
    } else if (!options_.metrics_address.empty()) {
      parts.push_back(absl::StrCat("pools from http://", options_.metrics_address, "/metrics"));
    }
    if (options_.pid > 0) {
      parts.push_back(absl::StrCat("VmRSS of pid ", options_.pid));
    } else if (!options_.metrics_address.empty()) {
      parts.push_back("process_resident_memory_bytes");
    }
    return absl::StrJoin(parts, ", ");
  }

  absl::StatusOr<MemorySnapshot> Take() override {
    MemorySnapshot snapshot;
    const bool pools_from_metrics = stub_ == nullptr && !options_.metrics_address.empty();
    const bool rss_from_metrics = options_.pid <= 0 && !options_.metrics_address.empty();
    if (pools_from_metrics || rss_from_metrics) {
      absl::StatusOr<std::string> text = FetchMetrics(options_.metrics_address, kTimeoutMs);
      if (!text.ok()) return text.status();
      MemorySnapshot parsed = ParseMetricsText(*text);
      if (pools_from_metrics) snapshot.pools = std::move(parsed.pools);
      if (rss_from_metrics) snapshot.rss_bytes = parsed.rss_bytes;
    }
    if (stub_ != nullptr) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds(kTimeoutMs));
      if (!token_.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token_));
      ndserve::admin::v1::GetMemoryStatusRequest request;
      request.set_device_id(-1);
      ndserve::admin::v1::MemoryStatus status;
      const grpc::Status s = stub_->GetMemoryStatus(&context, request, &status);
      if (!s.ok()) {
        return absl::UnavailableError(absl::StrCat("GetMemoryStatus on ", options_.admin_address,
                                                   ": ", s.error_message(), " (code ",
                                                   static_cast<int>(s.error_code()), ")"));
      }
      for (const auto& p : status.pools()) {
        snapshot.pools.push_back({p.device(), p.pool(), p.allocated_bytes(), p.cached_bytes(),
                                  p.reserved_bytes(), p.outstanding_allocations()});
      }
    }
    if (options_.pid > 0) {
      absl::StatusOr<std::uint64_t> rss = ReadVmRss(options_.pid);
      if (!rss.ok()) return rss.status();
      snapshot.rss_bytes = *rss;
    }
    return snapshot;
  }

 private:
  const MemoryProbeOptions options_;
  const std::string token_;
  std::unique_ptr<ndserve::admin::v1::MemoryAdmin::Stub> stub_;
};

}  // namespace

std::uint64_t MemorySnapshot::allocated_bytes() const {
  std::uint64_t sum = 0;
  for (const PoolMemory& p : pools) sum += p.allocated_bytes;
  return sum;
}

std::uint64_t MemorySnapshot::cached_bytes() const {
  std::uint64_t sum = 0;
  for (const PoolMemory& p : pools) sum += p.cached_bytes;
  return sum;
}

std::uint64_t MemorySnapshot::reserved_bytes() const {
  std::uint64_t sum = 0;
  for (const PoolMemory& p : pools) sum += p.reserved_bytes;
  return sum;
}

absl::StatusOr<std::unique_ptr<MemoryProbe>> MemoryProbe::Create(
    const MemoryProbeOptions& options) {
  if (options.admin_address.empty() && options.metrics_address.empty() && options.pid <= 0) {
    return absl::InvalidArgumentError(
        "no memory source: set an admin address, metrics address "
        "or daemon pid");
  }
  std::string token;
  if (!options.admin_token_file.empty()) {
    std::ifstream in(options.admin_token_file);
    if (!in) {
      return absl::NotFoundError(
          absl::StrCat("cannot read admin token file ", options.admin_token_file));
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    token = std::string(absl::StripAsciiWhitespace(buffer.str()));
  }
  return std::unique_ptr<MemoryProbe>(new ProbeImpl(options, std::move(token)));
}

MemorySnapshot ParseMetricsText(const std::string& text) {
  // Keyed by (device, pool) so the four families of one pool land in one entry.
  std::map<std::pair<std::string, std::string>, PoolMemory> pools;
  MemorySnapshot snapshot;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos) continue;
    const absl::string_view name(line.data(), name_end);
    absl::string_view labels;
    size_t value_begin = name_end;
    if (line[name_end] == '{') {
      const size_t close = line.find('}', name_end);
      if (close == std::string::npos) continue;
      labels = absl::string_view(line).substr(name_end, close - name_end + 1);
      value_begin = close + 1;
    }
    absl::string_view value_text =
        absl::StripLeadingAsciiWhitespace(absl::string_view(line).substr(value_begin));
    value_text = value_text.substr(0, value_text.find(' '));  // Drop a timestamp.
    double value = 0;
    if (!absl::SimpleAtod(value_text, &value) || value < 0) continue;
    const auto v = static_cast<std::uint64_t>(value);
    if (name == "process_resident_memory_bytes") {
      snapshot.rss_bytes = v;
      continue;
    }
    std::uint64_t PoolMemory::*field = nullptr;
    if (name == "ndserve_memory_allocated_bytes") {
      field = &PoolMemory::allocated_bytes;
    } else if (name == "ndserve_memory_cached_bytes") {
      field = &PoolMemory::cached_bytes;
    } else if (name == "ndserve_memory_reserved_bytes") {
      field = &PoolMemory::reserved_bytes;
    } else if (name == "ndserve_memory_outstanding_allocations") {
      field = &PoolMemory::outstanding_allocations;
    } else {
      continue;
    }
    const std::string device = LabelValue(labels, "device");
    const std::string pool = LabelValue(labels, "pool");
    PoolMemory& entry = pools[{device, pool}];
    entry.device = device;
    entry.pool = pool;
    entry.*field = v;
  }
  for (auto& [key, pool] : pools) snapshot.pools.push_back(std::move(pool));
  return snapshot;
}

absl::StatusOr<std::string> FetchMetrics(const std::string& address, int timeout_ms) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "' is not host:port"));
  }
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", address, ": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string connect_error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    connect_error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("connect ", address, ": ", connect_error));
  }
  // HTTP/1.0 so the server closes the connection after the body and never chunks it.
  const std::string request =
      absl::StrCat("GET /metrics HTTP/1.0\r\nHost: ", address, "\r\nAccept: text/plain\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      close(fd);
      return absl::UnavailableError(absl::StrCat("send to ", address, ": ", std::strerror(errno)));
    }
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buffer[16384];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return absl::UnavailableError(absl::StrCat("read from ", address, ": ", std::strerror(err)));
    }
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos || !absl::StartsWith(response, "HTTP/")) {
    return absl::DataLossError(absl::StrCat("malformed HTTP response from ", address));
  }
  const size_t status_begin = response.find(' ');
  if (status_begin == std::string::npos || response.compare(status_begin + 1, 3, "200") != 0) {
    return absl::UnavailableError(absl::StrCat(
        "GET http://", address, "/metrics: ", response.substr(0, response.find("\r\n"))));
  }
  return response.substr(header_end + 4);
}

}  // namespace ndserve::loadtest
