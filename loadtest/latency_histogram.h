#ifndef NDSERVE_LOADTEST_LATENCY_HISTOGRAM_H_
#define NDSERVE_LOADTEST_LATENCY_HISTOGRAM_H_

#include <cstdint>
#include <vector>

namespace ndserve::loadtest {

// Latencies in nanoseconds, bucketed log-linearly (HdrHistogram's layout: 128 linear
// sub-buckets per power of two), so any percentile is within 0.8% of the exact value
// while memory stays constant however long the run is: a million-request soak must not
// grow the client's RSS and blur its own leak check. min, max and the sum are exact.
//
// Not thread-safe: each load-generator thread records into its own and the results are
// merged once at the end.
class LatencyHistogram {
 public:
  LatencyHistogram();

  void Record(std::int64_t nanos);
  void Merge(const LatencyHistogram& other);

  std::int64_t count() const { return count_; }
  std::int64_t min() const { return count_ == 0 ? 0 : min_; }
  std::int64_t max() const { return max_; }
  double mean() const;
  // q in [0, 1]; the value at rank ceil(q * count), reported as the middle of its bucket
  // (clamped to [min, max]); the first and last rank are min and max exactly. 0 when
  // empty.
  std::int64_t Percentile(double q) const;

 private:
  static constexpr int kSubBucketBits = 7;
  static int BucketIndex(std::uint64_t value);
  static std::uint64_t BucketMidpoint(int index);

  std::vector<std::uint64_t> buckets_;
  std::int64_t count_ = 0;
  std::int64_t min_ = 0;
  std::int64_t max_ = 0;
  double sum_ = 0;
};

}  // namespace ndserve::loadtest

#endif  // NDSERVE_LOADTEST_LATENCY_HISTOGRAM_H_
