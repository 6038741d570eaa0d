// Exact per-model memory and the memory map, through a live ndserved:
//  - ModelStatistics.memory_usage, ndserve_model_memory_bytes and the admin status agree,
//    and unloading the model drops the pools' allocated bytes by exactly that figure;
//  - GetMemorySnapshot's blocks tile the pools' counters;
//  - http://<metrics>/memory draws one element per block, checked in a real browser
//    (headless chromium --dump-dom; skipped where chromium is not installed), which also
//    takes a screenshot into memory_map_test_output/ in the test's working directory;
//  - `ndserve-cli memory-map --out=F` writes the same page from the admin RPC.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/integration_support.h"

namespace ndserve::testing {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<grpc::ClientContext> Context() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return context;
}

int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// Every block of the snapshot, and their bytes per state.
struct BlockCounts {
  int blocks = 0;
  uint64_t allocated = 0;
  uint64_t free = 0;
};
BlockCounts Count(const ndserve::admin::v1::MemorySnapshot& snapshot) {
  BlockCounts c;
  for (const auto& pool : snapshot.pools()) {
    for (const auto& segment : pool.segments()) {
      for (const auto& block : segment.blocks()) {
        ++c.blocks;
        (block.state() == "allocated" ? c.allocated : c.free) += block.bytes();
      }
    }
  }
  return c;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::string text;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

absl::StatusOr<ndserve::admin::v1::MemorySnapshot> Snapshot(DaemonProcess& daemon) {
  ndserve::admin::v1::GetMemorySnapshotRequest request;
  request.set_device_id(-1);
  ndserve::admin::v1::MemorySnapshot snapshot;
  grpc::Status s = daemon.Admin()->GetMemorySnapshot(Context().get(), request, &snapshot);
  if (!s.ok()) return absl::UnknownError(s.error_message());
  return snapshot;
}

class MemoryMapTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<DaemonProcess>> started = DaemonProcess::Start();
    ASSERT_TRUE(started.ok()) << started.status();
    daemon_ = started->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  static DaemonProcess* daemon_;
};
DaemonProcess* MemoryMapTest::daemon_ = nullptr;

TEST_F(MemoryMapTest, SnapshotBlocksAddUpToThePools) {
  ASSERT_NE(daemon_, nullptr);
  absl::StatusOr<ndserve::admin::v1::MemorySnapshot> snapshot = Snapshot(*daemon_);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  uint64_t allocated = 0, cached = 0;
  for (const auto& pool : snapshot->pools()) {
    allocated += pool.status().allocated_bytes();
    cached += pool.status().cached_bytes();
  }
  const BlockCounts c = Count(*snapshot);
  EXPECT_GT(c.blocks, 0);
  EXPECT_EQ(c.allocated, allocated);
  EXPECT_EQ(c.free, cached);
  int owned_by_mlp = 0;
  for (const auto& pool : snapshot->pools()) {
    for (const auto& segment : pool.segments()) {
      for (const auto& block : segment.blocks()) {
        if (absl::StrContains(block.model(), "mlp")) ++owned_by_mlp;
      }
    }
  }
  EXPECT_GT(owned_by_mlp, 0);
}

TEST_F(MemoryMapTest, PageHasOneElementPerBlockInABrowser) {
  ASSERT_NE(daemon_, nullptr);
  absl::StatusOr<ndserve::admin::v1::MemorySnapshot> snapshot = Snapshot(*daemon_);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  const int blocks = Count(*snapshot).blocks;

  const std::string url = absl::StrCat("http://127.0.0.1:", daemon_->metrics_port(), "/memory");
  absl::StatusOr<std::string> page = HttpGet(daemon_->metrics_port(), "/memory");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(absl::StartsWith(*page, "<!DOCTYPE html>")) << page->substr(0, 200);
  EXPECT_EQ(CountOf(*page, "<rect class=\"block\""), blocks);
  // Self-contained: nothing is fetched from elsewhere.
  EXPECT_FALSE(absl::StrContains(*page, "<script"));
  EXPECT_FALSE(absl::StrContains(*page, "src="));
  EXPECT_FALSE(absl::StrContains(*page, "@import"));

  if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium is not installed (Debian: apt-get install chromium)";
  }
  const fs::path out = fs::absolute("memory_map_test_output");
  fs::create_directories(out);
  const std::string flags =
      "--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars";
  const std::string dom_path = (out / "memory.dom.html").string();
  ASSERT_EQ(std::system(absl::StrCat("chromium ", flags, " --dump-dom '", url, "' > '", dom_path,
                                     "' 2>/dev/null")
                            .c_str()),
            0);
  absl::StatusOr<std::string> dom_or = ReadFile(dom_path);
  ASSERT_TRUE(dom_or.ok()) << dom_or.status();
  const std::string& dom = *dom_or;
  // The browser parsed the SVG into elements: as many block rects as the pools have
  // blocks (the daemon is idle, so a second snapshot has the same ones).
  EXPECT_EQ(CountOf(dom, "<rect class=\"block\""), blocks) << dom.substr(0, 500);
  const std::string png = (out / "memory-map.png").string();
  ASSERT_EQ(std::system(absl::StrCat("chromium ", flags, " --window-size=1000,900 --screenshot='",
                                     png, "' '", url, "' >/dev/null 2>&1")
                            .c_str()),
            0);
  EXPECT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 1000u);
  std::cout << "screenshot: " << png << "\n";
}

TEST_F(MemoryMapTest, CliWritesTheSamePageOffline) {
  ASSERT_NE(daemon_, nullptr);
  absl::StatusOr<ndserve::admin::v1::MemorySnapshot> snapshot = Snapshot(*daemon_);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  const fs::path out = fs::absolute("memory_map_test_output");
  fs::create_directories(out);
  const std::string path = (out / "cli-map.html").string();
  fs::remove(path);
  ASSERT_EQ(std::system(absl::StrCat(NDSERVE_CLI_PATH, " memory-map --admin=127.0.0.1:",
                                     daemon_->admin_port(), " --out='", path, "'")
                            .c_str()),
            0);
  absl::StatusOr<std::string> page = ReadFile(path);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(absl::StartsWith(*page, "<!DOCTYPE html>"));
  EXPECT_EQ(CountOf(*page, "<rect class=\"block\""), Count(*snapshot).blocks);
  EXPECT_TRUE(absl::StrContains(*page, "model/recsys:1"));

  // A file it cannot write is an error, not a silent success.
  EXPECT_NE(std::system(absl::StrCat(NDSERVE_CLI_PATH, " memory-map --admin=127.0.0.1:",
                                     daemon_->admin_port(),
                                     " --out=/nonexistent-dir/map.html 2>/dev/null")
                            .c_str()),
            0);
}

// Runs last in the suite (it unloads recsys).
TEST_F(MemoryMapTest, ZPerModelMemoryAgreesEverywhereAndUnloadFreesExactlyIt) {
  ASSERT_NE(daemon_, nullptr);
  auto stub = daemon_->Inference();
  auto admin = daemon_->Admin();

  inference::ModelStatisticsRequest request;
  request.set_name("recsys");
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(stub->ModelStatistics(Context().get(), request, &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  ASSERT_EQ(stats.model_stats(0).memory_usage_size(), 1);
  const auto& usage = stats.model_stats(0).memory_usage(0);
  EXPECT_EQ(usage.type(), "CPU");
  EXPECT_EQ(usage.id(), 0);
  const uint64_t figure = usage.byte_size();
  EXPECT_GE(figure, 4u * 100000 * 32 * 4);  // its four embedding tables at least

  absl::StatusOr<std::string> metrics = HttpGet(daemon_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  double gauge = 0;
  for (const char* kind : {"parameters", "workspace", "state"}) {
    std::optional<double> v =
        MetricValue(*metrics, "ndserve_model_memory_bytes",
                    absl::StrCat(R"(model="recsys",version="1",device="cpu:0",kind=")", kind,
                                 "\""));
    ASSERT_TRUE(v.has_value()) << kind;
    gauge += *v;
  }
  EXPECT_EQ(gauge, static_cast<double>(figure));

  ndserve::admin::v1::GetMemoryStatusRequest status_request;
  status_request.set_device_id(-1);
  ndserve::admin::v1::MemoryStatus status;
  ASSERT_TRUE(admin->GetMemoryStatus(Context().get(), status_request, &status).ok());
  uint64_t admin_sum = 0;
  for (const auto& m : status.models()) {
    if (m.model() == "recsys") admin_sum += m.bytes();
  }
  EXPECT_EQ(admin_sum, figure);

  absl::StatusOr<uint64_t> before = AllocatedBytes(*admin);
  ASSERT_TRUE(before.ok()) << before.status();
  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("recsys");
  inference::RepositoryModelUnloadResponse unloaded;
  ASSERT_TRUE(stub->RepositoryModelUnload(Context().get(), unload, &unloaded).ok());
  absl::StatusOr<uint64_t> after = AllocatedBytes(*admin);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*before - *after, figure);

  metrics = HttpGet(daemon_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_FALSE(absl::StrContains(*metrics, "ndserve_model_memory_bytes{model=\"recsys\""));
  EXPECT_TRUE(absl::StrContains(*metrics, "ndserve_model_memory_bytes{model=\"mlp\""));
}

}  // namespace
}  // namespace ndserve::testing
