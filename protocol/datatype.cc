#include "protocol/datatype.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ndserve::protocol {

std::optional<int> WireDatatypeIndex(absl::string_view datatype) {
  for (int i = 0; i < static_cast<int>(kDatatypes.size()); ++i) {
    if (datatype == kDatatypes[i].name) return i;
  }
  return std::nullopt;
}

absl::StatusOr<int> ParseDatatypeIndex(absl::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(name));
  absl::string_view text = upper;
  for (int i = 0; i < static_cast<int>(kDatatypes.size()); ++i) {
    if (text == kDatatypes[i].name || text == kDatatypes[i].triton_name) return i;
  }
  absl::ConsumePrefix(&text, "TYPE_");
  if (text == "STRING") return WireDatatypeIndex("BYTES").value();
  if (std::optional<int> i = WireDatatypeIndex(text); i.has_value()) return *i;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown datatype '", name, "' (expected one of ", DatatypeList(), ")"));
}

int ElementSize(absl::string_view datatype) {
  const std::optional<int> i = WireDatatypeIndex(datatype);
  return i.has_value() ? static_cast<int>(kDatatypes[*i].element_size) : -1;
}

absl::string_view DatatypeList() {
  return "BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, BF16, FP32, "
         "FP64, BYTES";
}

}  // namespace ndserve::protocol
