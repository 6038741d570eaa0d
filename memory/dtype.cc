#include "memory/dtype.h"

#include "absl/status/status.h"
#include "protocol/datatype.h"

namespace ndserve {
namespace {

// DType enumerates protocol/datatype.h's table in its order; names and sizes come from
// there (one table for the daemon and its clients).
constexpr bool SameTable() {
  if (static_cast<size_t>(kNumDTypes) != protocol::kDatatypes.size()) return false;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (DTypeSize(static_cast<DType>(i)) != protocol::kDatatypes[i].element_size) return false;
  }
  return true;
}
static_assert(SameTable(), "memory/dtype.h and protocol/datatype.h disagree");

}  // namespace

absl::string_view DTypeName(DType dtype) {
  const auto i = static_cast<size_t>(dtype);
  return i < protocol::kDatatypes.size() ? protocol::kDatatypes[i].name : "UNKNOWN";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  absl::StatusOr<int> i = protocol::ParseDatatypeIndex(name);
  if (!i.ok()) return i.status();
  return static_cast<DType>(*i);
}

std::optional<DType> WireDType(absl::string_view datatype) {
  const std::optional<int> i = protocol::WireDatatypeIndex(datatype);
  if (!i.has_value()) return std::nullopt;
  return static_cast<DType>(*i);
}

}  // namespace ndserve
