#ifndef NDSERVE_LOADTEST_REPORT_H_
#define NDSERVE_LOADTEST_REPORT_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "loadtest/load_driver.h"
#include "loadtest/memory_probe.h"

namespace ndserve::loadtest {

// The daemon's memory after `requests` requests of a soak.
struct MemorySample {
  std::int64_t requests = 0;
  MemorySnapshot memory;
};

// A verdict the run is judged by; any failed check makes the exit status 1.
struct Check {
  std::string name;
  bool passed = false;
  std::string detail;
};

// Everything a run prints. Plain data, filled by main.
struct Report {
  std::string address;
  std::string model;
  std::string model_version;
  int batch = 1;
  std::string mode;  // "closed" or "open"
  int concurrency = 0;
  double rate = 0;
  int threads = 0;
  int channels = 0;
  std::string inputs;  // "input:FP32[1,64], ..."
  LoadResult result;
  std::string memory_source;       // empty: memory not read
  std::string memory_unavailable;  // why it wasn't, when it wasn't
  std::optional<MemorySnapshot> before;
  std::optional<MemorySnapshot> after;
  std::vector<MemorySample> samples;
  std::vector<Check> checks;

  bool passed() const;
};

std::string FormatBytes(double bytes);
std::string FormatSignedBytes(std::int64_t bytes);

void PrintText(const Report& report, std::ostream& out);
void PrintJson(const Report& report, std::ostream& out);
// requests,allocated_bytes,cached_bytes,reserved_bytes,rss_bytes per sample.
void PrintSamplesCsv(const Report& report, std::ostream& out);

}  // namespace ndserve::loadtest

#endif  // NDSERVE_LOADTEST_REPORT_H_
