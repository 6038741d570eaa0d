#include "loadtest/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace ndserve::loadtest {
namespace {

constexpr std::uint64_t kSubBuckets = 1u << 7;
// Values up to 2^63 - 1: 57 doublings above the linear range, 128 sub-buckets each.
constexpr int kNumBuckets = (64 - 7) * 128;

}  // namespace

LatencyHistogram::LatencyHistogram() : buckets_(kNumBuckets, 0) {}

int LatencyHistogram::BucketIndex(std::uint64_t value) {
  if (value < kSubBuckets) return static_cast<int>(value);
  const int msb = std::bit_width(value) - 1;
  const int shift = msb - kSubBucketBits;
  return ((shift + 1) << kSubBucketBits) + static_cast<int>((value >> shift) - kSubBuckets);
}

std::uint64_t LatencyHistogram::BucketMidpoint(int index) {
  if (index < static_cast<int>(kSubBuckets)) return static_cast<std::uint64_t>(index);
  const int shift = (index >> kSubBucketBits) - 1;
  const std::uint64_t sub = kSubBuckets + (static_cast<std::uint64_t>(index) & (kSubBuckets - 1));
  const std::uint64_t low = sub << shift;
  return low + ((std::uint64_t{1} << shift) >> 1);
}

void LatencyHistogram::Record(std::int64_t nanos) {
  if (nanos < 0) nanos = 0;
  ++buckets_[BucketIndex(static_cast<std::uint64_t>(nanos))];
  if (count_ == 0 || nanos < min_) min_ = nanos;
  max_ = std::max(max_, nanos);
  sum_ += static_cast<double>(nanos);
  ++count_;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (int i = 0; i < kNumBuckets; ++i) buckets_[i] += other.buckets_[i];
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
  count_ += other.count_;
}

double LatencyHistogram::mean() const {
  return count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_);
}

std::int64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const auto rank = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::ceil(q * static_cast<double>(count_))));
  // The extremes are known exactly; only ranks in between need the buckets.
  if (rank == 1) return min_;
  if (rank >= count_) return max_;
  std::int64_t seen = 0;
  for (int i = 0; i < kNumBuckets; ++i) {
    seen += static_cast<std::int64_t>(buckets_[i]);
    if (seen >= rank) {
      return std::clamp(static_cast<std::int64_t>(BucketMidpoint(i)), min_, max_);
    }
  }
  return max_;
}

}  // namespace ndserve::loadtest
