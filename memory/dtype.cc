#include "memory/dtype.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace ndserve {

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "BOOL";
    case DType::kUint8:
      return "UINT8";
    case DType::kUint16:
      return "UINT16";
    case DType::kUint32:
      return "UINT32";
    case DType::kUint64:
      return "UINT64";
    case DType::kInt8:
      return "INT8";
    case DType::kInt16:
      return "INT16";
    case DType::kInt32:
      return "INT32";
    case DType::kInt64:
      return "INT64";
    case DType::kFp16:
      return "FP16";
    case DType::kBf16:
      return "BF16";
    case DType::kFp32:
      return "FP32";
    case DType::kFp64:
      return "FP64";
    case DType::kBytes:
      return "BYTES";
  }
  return "UNKNOWN";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  std::string upper = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(name));
  absl::string_view text = upper;
  absl::ConsumePrefix(&text, "TYPE_");
  // Triton's config says STRING where KServe v2 says BYTES.
  if (text == "STRING") return DType::kBytes;
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType dtype = static_cast<DType>(i);
    if (text == DTypeName(dtype)) return dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown datatype '", name,
      "' (expected one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, "
      "BF16, FP32, FP64, BYTES)"));
}

std::optional<DType> WireDType(absl::string_view datatype) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType dtype = static_cast<DType>(i);
    if (datatype == DTypeName(dtype)) return dtype;
  }
  return std::nullopt;
}

}  // namespace ndserve
