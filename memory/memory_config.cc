#include "memory/memory_config.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ndserve {
namespace {

struct Unit {
  const char* suffix;
  double scale;
};

// Longest suffixes first so "GiB" is not read as "B".
constexpr Unit kUnits[] = {
    {"kib", 1024.0},       {"mib", 1048576.0},    {"gib", 1073741824.0}, {"tib", 1099511627776.0},
    {"kb", 1e3},           {"mb", 1e6},           {"gb", 1e9},           {"tb", 1e12},
    {"k", 1024.0},         {"m", 1048576.0},      {"g", 1073741824.0},   {"t", 1099511627776.0},
    {"b", 1.0},
};

absl::Status LimitError(absl::string_view source, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      source, "='", text, "' is not a valid memory limit: ", why,
      " (use bytes, a size such as 512MiB, 8GiB or 1.5GB, or a percentage such as 80%)"));
}

}  // namespace

std::uint64_t MemoryLimit::Resolve(std::uint64_t device_total_bytes) const {
  if (unlimited) return kNoLimit;
  if (fraction > 0) {
    return static_cast<std::uint64_t>(static_cast<double>(device_total_bytes) * fraction);
  }
  return bytes;
}

absl::StatusOr<MemoryLimit> ParseMemoryLimit(absl::string_view text, absl::string_view source) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  absl::string_view s = lower;
  MemoryLimit limit;
  if (s.empty() || s == "none" || s == "unlimited") return limit;
  limit.unlimited = false;

  if (absl::ConsumeSuffix(&s, "%")) {
    double percent = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(s), &percent) || !std::isfinite(percent)) {
      return LimitError(source, text, "not a number");
    }
    if (percent <= 0 || percent > 100) {
      return LimitError(source, text, "a percentage must be in (0, 100]");
    }
    limit.fraction = percent / 100.0;
    return limit;
  }

  double scale = 1.0;
  for (const Unit& unit : kUnits) {
    if (absl::ConsumeSuffix(&s, unit.suffix)) {
      scale = unit.scale;
      break;
    }
  }
  s = absl::StripAsciiWhitespace(s);
  double value = 0;
  if (s.empty() || !absl::SimpleAtod(s, &value) || !std::isfinite(value)) {
    return LimitError(source, text, "not a number");
  }
  if (value <= 0) return LimitError(source, text, "must be positive");
  const double bytes = value * scale;
  if (bytes < 1.0 || bytes > 1.8e19) return LimitError(source, text, "out of range");
  if (scale == 1.0 && std::floor(value) != value) {
    return LimitError(source, text, "a byte count must be a whole number");
  }
  limit.bytes = static_cast<std::uint64_t>(bytes);
  return limit;
}

absl::StatusOr<int> ParseDebugLevel(absl::string_view text, absl::string_view source) {
  int level = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &level) || level < 0 || level > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, "='", text, "' is not a valid debug level (expected 0, 1 or 2)"));
  }
  return level;
}

absl::StatusOr<std::size_t> ParseThreadCacheBytes(absl::string_view text,
                                                  absl::string_view source) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (lower == "0" || lower == "off") return 0;
  absl::StatusOr<MemoryLimit> size = ParseMemoryLimit(text, source);
  if (!size.ok() || size->unlimited || size->fraction != 0 ||
      size->bytes > (std::uint64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, "='", text, "' is not a valid thread cache size (expected a size up to 1GiB, "
        "such as 4MiB, or 0 to turn thread caches off)"));
  }
  return static_cast<std::size_t>(size->bytes);
}

}  // namespace ndserve
