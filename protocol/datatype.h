#ifndef NDSERVE_PROTOCOL_DATATYPE_H_
#define NDSERVE_PROTOCOL_DATATYPE_H_

// The KServe v2 datatypes as they travel: the one table of their names, Triton's
// model-config spellings and element sizes. memory/dtype.h's DType enumerates the same
// types in the same order (checked there at compile time); the server's codecs, the CLI
// and the load generator read names and sizes from here instead of keeping their own.

#include <array>
#include <cstddef>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ndserve::protocol {

struct DatatypeInfo {
  // KServe v2 spelling: "FP32", "BYTES".
  absl::string_view name;
  // Triton config.pbtxt spelling: "TYPE_FP32", "TYPE_STRING".
  absl::string_view triton_name;
  // Bytes per element; 0 for BYTES (each element a 4-byte little-endian length + data).
  std::size_t element_size;
};

inline constexpr std::array<DatatypeInfo, 14> kDatatypes = {{
    {"BOOL", "TYPE_BOOL", 1},
    {"UINT8", "TYPE_UINT8", 1},
    {"UINT16", "TYPE_UINT16", 2},
    {"UINT32", "TYPE_UINT32", 4},
    {"UINT64", "TYPE_UINT64", 8},
    {"INT8", "TYPE_INT8", 1},
    {"INT16", "TYPE_INT16", 2},
    {"INT32", "TYPE_INT32", 4},
    {"INT64", "TYPE_INT64", 8},
    {"FP16", "TYPE_FP16", 2},
    {"BF16", "TYPE_BF16", 2},
    {"FP32", "TYPE_FP32", 4},
    {"FP64", "TYPE_FP64", 8},
    {"BYTES", "TYPE_STRING", 0},
}};

// The index into kDatatypes of a KServe datatype string, exact spelling only (the wire
// protocol is case-sensitive); nullopt otherwise.
std::optional<int> WireDatatypeIndex(absl::string_view datatype);

// The index of a name in any case, with or without Triton's "TYPE_" prefix, "STRING"
// meaning BYTES. INVALID_ARGUMENT listing the valid names otherwise.
absl::StatusOr<int> ParseDatatypeIndex(absl::string_view name);

// Bytes per element of a KServe datatype string: 0 for BYTES, -1 when unknown.
int ElementSize(absl::string_view datatype);

// "BOOL, UINT8, ..., BYTES": for error messages.
absl::string_view DatatypeList();

}  // namespace ndserve::protocol

#endif  // NDSERVE_PROTOCOL_DATATYPE_H_
