#include "server/memory_collector.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "memory/device_pools.h"
#include "memory/manager_levels.h"
#include "memory/memory_system.h"
#include "memory/nd_manager.h"
#include "memory/pool.h"
#include "memory/pool_stats.h"

namespace ndserve {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void Add(MetricFamily* family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (family->type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  family->metric.push_back(std::move(m));
}

double D(std::uint64_t v) { return static_cast<double>(v); }

}  // namespace

MemoryCollector::MemoryCollector(const DevicePools* pools, ManagerLevelSource managers)
    : pools_(pools), managers_(std::move(managers)) {}

void MemoryCollector::SetModelSource(ModelMemorySource models) {
  absl::MutexLock lock(&models_mu_);
  models_ = std::move(models);
}

std::vector<ManagerLevelSample> MemoryCollector::NDManagerLevels(const MemorySystem& memory) {
  const ManagerLevelSnapshot snapshot = memory.LevelCounts();
  std::vector<ManagerLevelSample> out;
  for (int i = 0; i < kNumManagerLevels; ++i) {
    const auto level = static_cast<ManagerLevel>(i);
    const ManagerLevelCounts& c = snapshot[level];
    auto clamp = [](std::int64_t v) { return static_cast<std::uint64_t>(v < 0 ? 0 : v); };
    out.push_back({std::string(ManagerLevelName(level)), clamp(c.live_managers),
                   clamp(c.attached_resources), clamp(c.cap_violations)});
  }
  return out;
}

std::uint64_t MemoryCollector::ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size_pages = 0;
  unsigned long long resident_pages = 0;
  const int read = std::fscanf(f, "%llu %llu", &size_pages, &resident_pages);
  std::fclose(f);
  if (read != 2) return 0;
  return resident_pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

std::vector<MetricFamily> MemoryCollector::Collect() const {
  MetricFamily allocated =
      Family("ndserve_memory_allocated_bytes", "Bytes in live blocks, as rounded by the pool.",
             MetricType::Gauge);
  MetricFamily cached =
      Family("ndserve_memory_cached_bytes", "Bytes the pool holds free for reuse (reclaimable).",
             MetricType::Gauge);
  MetricFamily reserved =
      Family("ndserve_memory_reserved_bytes",
             "Bytes the pool holds from the device: allocated plus cached.", MetricType::Gauge);
  MetricFamily limit = Family(
      "ndserve_memory_limit_bytes",
      "Cap on the bytes the pool may hold from the device; the device's total when unlimited.",
      MetricType::Gauge);
  MetricFamily peak = Family("ndserve_memory_peak_allocated_bytes",
                             "Highest allocated bytes since start.", MetricType::Gauge);
  MetricFamily inactive =
      Family("ndserve_memory_inactive_split_bytes",
             "Cached bytes inside segments that also hold live blocks (fragmentation).",
             MetricType::Gauge);
  MetricFamily outstanding = Family("ndserve_memory_outstanding_allocations",
                                    "Live blocks handed out by the pool.", MetricType::Gauge);
  MetricFamily allocs =
      Family("ndserve_memory_alloc_total",
             "Allocations served, from the cache (hit) or not (miss).", MetricType::Counter);
  MetricFamily device_allocs =
      Family("ndserve_memory_device_alloc_total",
             "Allocations the pool made on the device allocator.", MetricType::Counter);
  MetricFamily device_frees =
      Family("ndserve_memory_device_free_total", "Frees the pool made on the device allocator.",
             MetricType::Counter);
  MetricFamily reclaimed =
      Family("ndserve_memory_reclaimed_bytes_total",
             "Cached bytes given back to the device, by admin request or under memory pressure.",
             MetricType::Counter);
  MetricFamily ooms = Family("ndserve_memory_oom_total",
                             "Allocations refused with RESOURCE_EXHAUSTED.", MetricType::Counter);

  for (const Pool* pool : pools_->All()) {
    const PoolStats s = pool->Stats();
    const std::string device = pool->device().ToString();
    const std::string kind(pool->name());
    const std::vector<ClientMetric::Label> dp = {{"device", device}, {"pool", kind}};
    const std::vector<ClientMetric::Label> d = {{"device", device}};
    Add(&allocated, dp, D(s.allocated_bytes));
    Add(&cached, dp, D(s.cached_bytes));
    Add(&reserved, dp, D(s.reserved_bytes));
    Add(&limit, d, D(s.limit_bytes == kNoLimit ? s.device_total_bytes : s.limit_bytes));
    Add(&peak, dp, D(s.peak_allocated_bytes));
    Add(&inactive, dp, D(s.inactive_split_bytes));
    Add(&outstanding, dp, D(s.outstanding_allocations));
    Add(&allocs, {{"device", device}, {"pool", kind}, {"result", "hit"}}, D(s.cache_hits));
    Add(&allocs, {{"device", device}, {"pool", kind}, {"result", "miss"}}, D(s.cache_misses));
    Add(&device_allocs, d, D(s.device_allocs));
    Add(&device_frees, d, D(s.device_frees));
    Add(&reclaimed, {{"device", device}, {"pool", kind}, {"reason", "admin"}},
        D(s.reclaimed_bytes_admin));
    Add(&reclaimed, {{"device", device}, {"pool", kind}, {"reason", "pressure"}},
        D(s.reclaimed_bytes_pressure));
    Add(&ooms, d, D(s.oom_count));
  }

  std::vector<MetricFamily> out;
  for (MetricFamily* f : {&allocated, &cached, &reserved, &limit, &peak, &inactive, &outstanding,
                          &allocs, &device_allocs, &device_frees, &reclaimed, &ooms}) {
    if (!f->metric.empty()) out.push_back(std::move(*f));
  }

  if (managers_) {
    MetricFamily live =
        Family("ndserve_manager_live", "Open NDManagers, by level.", MetricType::Gauge);
    MetricFamily resources =
        Family("ndserve_manager_resources", "Arrays attached to open NDManagers, by level.",
               MetricType::Gauge);
    MetricFamily violations =
        Family("ndserve_manager_cap_violations_total",
               "Attaches refused because the manager was capped (a would-be leak), by level.",
               MetricType::Counter);
    for (const ManagerLevelSample& level : managers_()) {
      const std::vector<ClientMetric::Label> l = {{"level", level.level}};
      Add(&live, l, D(level.live));
      Add(&resources, l, D(level.resources));
      Add(&violations, l, D(level.cap_violations));
    }
    for (MetricFamily* f : {&live, &resources, &violations}) {
      if (!f->metric.empty()) out.push_back(std::move(*f));
    }
  }

  ModelMemorySource models;
  {
    absl::MutexLock lock(&models_mu_);
    models = models_;
  }
  if (models) {
    MetricFamily model_bytes = Family(
        "ndserve_model_memory_bytes",
        "Bytes a loaded model version holds, from its manager tree as the pool rounded them, "
        "by device and kind (parameters, workspace, state).",
        MetricType::Gauge);
    for (const ModelMemorySample& m : models()) {
      Add(&model_bytes,
          {{"model", m.model}, {"version", m.version}, {"device", m.device}, {"kind", m.kind}},
          D(m.bytes));
    }
    if (!model_bytes.metric.empty()) out.push_back(std::move(model_bytes));
  }

  MetricFamily rss =
      Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge);
  Add(&rss, {}, D(ResidentBytes()));
  out.push_back(std::move(rss));
  return out;
}

}  // namespace ndserve
