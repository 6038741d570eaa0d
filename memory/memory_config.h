#ifndef NDSERVE_MEMORY_MEMORY_CONFIG_H_
#define NDSERVE_MEMORY_MEMORY_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "memory/pool.h"

namespace ndserve {

// The memory settings as values, and pure parsers for their text forms. memory/ reads no
// flags and no environment: server/options.cc resolves flags and environment variables
// into a MemoryConfig and names the source in every error.

// A memory limit as written by the operator: absolute bytes, or a fraction of the
// device's memory that is resolved once the device is known.
struct MemoryLimit {
  bool unlimited = true;
  std::uint64_t bytes = 0;  // when !unlimited and fraction == 0
  double fraction = 0;      // 0.8 for "80%"

  std::uint64_t Resolve(std::uint64_t device_total_bytes) const;
};

// Parses "1073741824", "512MiB", "8GiB", "1.5GB", "64k", "80%", or "" / "none" for no
// limit. Decimal units (kB, MB, GB, TB) are powers of 1000, binary ones (KiB, MiB,
// GiB, TiB, and the bare K, M, G, T) powers of 1024. Zero, negative, fractional byte
// counts and anything unparsable are INVALID_ARGUMENT naming `source` (the flag or
// environment variable the text came from).
absl::StatusOr<MemoryLimit> ParseMemoryLimit(absl::string_view text, absl::string_view source);

// Parses a debug level 0, 1 or 2; errors name `source`.
absl::StatusOr<int> ParseDebugLevel(absl::string_view text, absl::string_view source);

// Parses the per-thread cache budget: a size as ParseMemoryLimit takes it (no
// percentage), up to 1 GiB, or "0" / "off" for no thread caches. Errors name `source`.
absl::StatusOr<std::size_t> ParseThreadCacheBytes(absl::string_view text,
                                                  absl::string_view source);

// The settings of one MemorySystem (memory_system.h). Plain value.
struct MemoryConfig {
  PoolKind pool = PoolKind::kBinned;
  MemoryLimit limit;
  int debug_level = 0;
  std::size_t thread_cache_bytes = kDefaultThreadCacheBytes;
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_MEMORY_CONFIG_H_
