#ifndef NDSERVE_MEMORY_DTYPE_H_
#define NDSERVE_MEMORY_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ndserve {

// Element types of the KServe v2 protocol, in its spelling. Every type but BYTES has a
// fixed element size; BYTES tensors (length-prefixed strings) are variable-size and are
// kept by the engine as host data, never in an NDArray.
enum class DType : std::uint8_t {
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kBf16,
  kFp32,
  kFp64,
  kBytes,
};

inline constexpr int kNumDTypes = static_cast<int>(DType::kBytes) + 1;

// Bytes per element; 0 for BYTES (variable).
constexpr std::size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kUint8:
    case DType::kInt8:
      return 1;
    case DType::kUint16:
    case DType::kInt16:
    case DType::kFp16:
    case DType::kBf16:
      return 2;
    case DType::kUint32:
    case DType::kInt32:
    case DType::kFp32:
      return 4;
    case DType::kUint64:
    case DType::kInt64:
    case DType::kFp64:
      return 8;
    case DType::kBytes:
      return 0;
  }
  return 0;
}

constexpr bool DTypeIsFixedSize(DType dtype) { return DTypeSize(dtype) != 0; }

// "BOOL", "UINT8", ..., "FP32", "BYTES": the KServe v2 datatype strings.
absl::string_view DTypeName(DType dtype);

// Accepts the KServe v2 names in any case, and Triton's model-config spelling with a
// "TYPE_" prefix ("TYPE_FP32"). INVALID_ARGUMENT names the text otherwise.
absl::StatusOr<DType> ParseDType(absl::string_view name);

// The KServe v2 datatype string ("FP32", "BYTES", ...) as a DType. Exact spelling only
// (the wire protocol is case-sensitive; config.pbtxt spellings such as "TYPE_FP32" are
// not datatypes); nullopt otherwise. Servers decode with it and clients check with it.
std::optional<DType> WireDType(absl::string_view datatype);

// The DType of a C++ element type, for typed helpers (FromHostValues, DataAs, ToVector).
// FP16, BF16 and BYTES have no C++ type here.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};
template <>
struct DTypeOf<std::uint8_t> {
  static constexpr DType value = DType::kUint8;
};
template <>
struct DTypeOf<std::uint16_t> {
  static constexpr DType value = DType::kUint16;
};
template <>
struct DTypeOf<std::uint32_t> {
  static constexpr DType value = DType::kUint32;
};
template <>
struct DTypeOf<std::uint64_t> {
  static constexpr DType value = DType::kUint64;
};
template <>
struct DTypeOf<std::int8_t> {
  static constexpr DType value = DType::kInt8;
};
template <>
struct DTypeOf<std::int16_t> {
  static constexpr DType value = DType::kInt16;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFp32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFp64;
};
template <typename T>
inline constexpr DType kDTypeOf = DTypeOf<T>::value;

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_DTYPE_H_
