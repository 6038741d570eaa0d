#include "memory/memory_config.h"

#include "gtest/gtest.h"

namespace ndserve {
namespace {

constexpr std::uint64_t kGiB = 1ull << 30;

TEST(ParseMemoryLimitTest, AcceptsBytesUnitsAndPercentages) {
  struct Case {
    const char* text;
    std::uint64_t bytes;
  } cases[] = {
      {"1073741824", kGiB},       {"512MiB", 512ull << 20},     {"8GiB", 8 * kGiB},
      {"1.5GB", 1500000000ull},   {"64k", 64ull << 10},         {"2 GiB", 2 * kGiB},
      {"100kB", 100000ull},       {"1TiB", 1ull << 40},         {"3g", 3 * kGiB},
  };
  for (const Case& c : cases) {
    absl::StatusOr<MemoryLimit> limit = ParseMemoryLimit(c.text, "NDSERVE_MEMORY_LIMIT");
    ASSERT_TRUE(limit.ok()) << c.text << ": " << limit.status();
    EXPECT_FALSE(limit->unlimited);
    EXPECT_EQ(limit->Resolve(16 * kGiB), c.bytes) << c.text;
  }
  absl::StatusOr<MemoryLimit> percent = ParseMemoryLimit("80%", "NDSERVE_MEMORY_LIMIT");
  ASSERT_TRUE(percent.ok());
  EXPECT_EQ(percent->Resolve(10 * kGiB), 8 * kGiB);
  for (const char* none : {"", "none", "unlimited"}) {
    absl::StatusOr<MemoryLimit> limit = ParseMemoryLimit(none, "X");
    ASSERT_TRUE(limit.ok());
    EXPECT_EQ(limit->Resolve(kGiB), kNoLimit);
  }
}

TEST(ParseMemoryLimitTest, RejectsNonsenseAndNamesTheVariable) {
  for (const char* bad : {"lots", "-1", "0", "0GiB", "-5MiB", "150%", "0%", "abc%", "1.5",
                          "12 parsecs", "GiB", "nan", "inf"}) {
    absl::StatusOr<MemoryLimit> limit = ParseMemoryLimit(bad, "NDSERVE_MEMORY_LIMIT");
    ASSERT_FALSE(limit.ok()) << bad;
    EXPECT_EQ(limit.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(limit.status().message().find("NDSERVE_MEMORY_LIMIT"), absl::string_view::npos)
        << limit.status();
  }
}

TEST(ParseThreadCacheBytesTest, SizesAndOff) {
  EXPECT_EQ(*ParseThreadCacheBytes("4MiB", "NDSERVE_MEMORY_THREAD_CACHE"), 4u << 20);
  EXPECT_EQ(*ParseThreadCacheBytes("65536", "NDSERVE_MEMORY_THREAD_CACHE"), 65536u);
  EXPECT_EQ(*ParseThreadCacheBytes("0", "NDSERVE_MEMORY_THREAD_CACHE"), 0u);
  EXPECT_EQ(*ParseThreadCacheBytes("OFF", "NDSERVE_MEMORY_THREAD_CACHE"), 0u);
  for (const char* bad : {"lots", "-1", "50%", "none", "2GiB", "1.5"}) {
    absl::StatusOr<std::size_t> bytes = ParseThreadCacheBytes(bad, "NDSERVE_MEMORY_THREAD_CACHE");
    ASSERT_FALSE(bytes.ok()) << bad;
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bytes.status().message().find("NDSERVE_MEMORY_THREAD_CACHE"),
              absl::string_view::npos)
        << bytes.status();
    EXPECT_NE(bytes.status().message().find("not a valid thread cache size"),
              absl::string_view::npos)
        << bytes.status();
  }
}

TEST(PoolKindTest, ParsesKnownNamesOnly) {
  EXPECT_EQ(*ParsePoolKind("binned"), PoolKind::kBinned);
  EXPECT_EQ(*ParsePoolKind("SPLIT"), PoolKind::kSplit);
  EXPECT_EQ(*ParsePoolKind("simple"), PoolKind::kSimple);
  EXPECT_EQ(*ParsePoolKind("none"), PoolKind::kNone);
  EXPECT_FALSE(ParsePoolKind("cuda").ok());
  EXPECT_FALSE(ParsePoolKind("").ok());
}

}  // namespace
}  // namespace ndserve
