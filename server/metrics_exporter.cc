#include "server/metrics_exporter.h"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/logging.h"

namespace ndserve {
namespace {

// civetweb gives each accepted connection a worker thread until its request has been read,
// so silent sockets hold workers: with prometheus-cpp's default of 2 threads two idle
// connections took /metrics offline for civetweb's 30 s request timeout. Enough threads
// that a handful of idle or slow clients leave workers free (they sleep while idle), and a
// timeout short enough that a flood of them only delays a scrape by a couple of seconds.
constexpr int kHttpThreads = 32;
constexpr int kRequestTimeoutMs = 2000;

// Opens and at once closes a connection to the IPv4 listener of `address` ("host:port";
// a wildcard host is reached over loopback). Other addresses are left alone (the stop
// then takes civetweb's poll interval).
void WakeListener(const std::string& address, int port) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "localhost") host = "127.0.0.1";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  close(fd);
}

// civetweb's begin_request hook gets only the connection; the exposer keeps its
// CivetServer to itself, so the hook finds the pages by the listening port the request
// came in on. An exporter registers after binding and unregisters before its listener
// stops (which waits for requests in progress), so a page is never rendered for an
// exporter that is gone.
using PageMap = std::map<std::string, std::function<std::string()>>;
struct PageRegistry {
  absl::Mutex mu;
  absl::flat_hash_map<int, const PageMap*> by_port ABSL_GUARDED_BY(mu);
};
PageRegistry& Pages() {
  static PageRegistry* const registry = new PageRegistry;  // never destroyed: threads may outlive main
  return *registry;
}

int ServePage(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info == nullptr || info->local_uri == nullptr || info->request_method == nullptr) return 0;
  std::function<std::string()> render;
  {
    PageRegistry& registry = Pages();
    absl::MutexLock lock(&registry.mu);
    auto it = registry.by_port.find(info->server_port);
    if (it == registry.by_port.end()) return 0;
    auto page = it->second->find(info->local_uri);
    if (page == it->second->end()) return 0;
    render = page->second;
  }
  const absl::string_view method = info->request_method;
  if (method != "GET" && method != "HEAD") {
    mg_printf(conn,
              "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\nContent-Length: 0\r\n\r\n");
    return 405;
  }
  const std::string body = render();
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
            "Cache-Control: no-store\r\nContent-Length: %zu\r\n\r\n",
            body.size());
  if (method == "GET") mg_write(conn, body.data(), body.size());
  return 200;  // non-zero: handled here, civetweb does not look further
}

}  // namespace

void MetricsExporter::AddHtmlPage(std::string path, std::function<std::string()> render) {
  pages_[std::move(path)] = std::move(render);
}

MetricsExporter::MetricsExporter(const DevicePools* pools, ManagerLevelSource managers)
    : registry_(std::make_shared<prometheus::Registry>()),
      memory_(std::make_shared<MemoryCollector>(pools, std::move(managers))),
      inference_(std::make_unique<InferenceMetrics>(registry_.get())),
      trainer_(std::make_unique<TrainerMetrics>(registry_.get())) {}

MetricsExporter::~MetricsExporter() { Stop(); }

absl::Status MetricsExporter::Start(const std::string& address) {
  if (exposer_ != nullptr) return absl::FailedPreconditionError("metrics exporter already started");
  try {
    // civetweb throws when it cannot bind; exceptions stop at this third-party boundary.
    CivetCallbacks callbacks;
    callbacks.begin_request = &ServePage;
    auto exposer = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", address, "num_threads",
                                 absl::StrCat(kHttpThreads), "request_timeout_ms",
                                 absl::StrCat(kRequestTimeoutMs)},
        &callbacks);
    exposer->RegisterCollectable(memory_);
    exposer->RegisterCollectable(registry_);
    const std::vector<int> ports = exposer->GetListeningPorts();
    port_ = ports.empty() ? 0 : ports.front();
    address_ = address;
    exposer_ = std::move(exposer);
    if (!pages_.empty()) {
      PageRegistry& registry = Pages();
      absl::MutexLock lock(&registry.mu);
      for (int port : ports) registry.by_port[port] = &pages_;
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("--metrics_address='", address, "': cannot listen: ", e.what()));
  }
  return absl::OkStatus();
}

void MetricsExporter::Stop() {
  if (exposer_ == nullptr) return;
  {
    PageRegistry& registry = Pages();
    absl::MutexLock lock(&registry.mu);
    for (int port : exposer_->GetListeningPorts()) registry.by_port.erase(port);
  }
  // civetweb's accept loop looks at its stop flag only between polls of 2 s, which would add
  // up to 2 s to every exit. Connections to the port wake the poll, so the listener stops
  // within a few milliseconds of being asked to.
  std::atomic<bool> stopped{false};
  std::thread stopper([this, &stopped] {
    exposer_.reset();
    stopped.store(true);
  });
  while (!stopped.load()) {
    WakeListener(address_, port_);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stopper.join();
  port_ = 0;
}

std::string MetricsExporter::Text() const {
  // The same collectables in the same order as the exposer serves them.
  std::vector<prometheus::MetricFamily> families = memory_->Collect();
  std::vector<prometheus::MetricFamily> recorded = registry_->Collect();
  families.insert(families.end(), std::make_move_iterator(recorded.begin()),
                  std::make_move_iterator(recorded.end()));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace ndserve
