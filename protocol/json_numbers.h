#ifndef NDSERVE_PROTOCOL_JSON_NUMBERS_H_
#define NDSERVE_PROTOCOL_JSON_NUMBERS_H_

// A tensor's little-endian bytes as the JSON bools and numbers of KServe v2's `data`,
// shared by the daemon's HTTP responses and the load generator's HTTP requests. Header
// only and templated on the writer, so ndserve_protocol itself does not link a JSON
// library; any writer with RapidJSON's Bool/Int/Uint/Int64/Uint64/Double works.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace ndserve::protocol {
namespace json_numbers_internal {

template <typename T, typename Writer, typename Put>
void EachElement(absl::string_view raw, Writer* w, Put put) {
  for (size_t pos = 0; pos + sizeof(T) <= raw.size(); pos += sizeof(T)) {
    T v;
    std::memcpy(&v, raw.data() + pos, sizeof(T));
    put(w, v);
  }
}

}  // namespace json_numbers_internal

// Appends every whole element of `raw` (datatype `dtype`) to the writer's open array; the
// datatype is resolved once, not per element. False, writing nothing, for FP16, BF16 and
// BYTES (no plain JSON number: callers convert or refuse them) and unknown names.
template <typename Writer>
bool WriteJsonNumbers(absl::string_view dtype, absl::string_view raw, Writer* w) {
  using json_numbers_internal::EachElement;
  if (dtype == "BOOL") {
    EachElement<uint8_t>(raw, w, [](Writer* o, uint8_t v) { o->Bool(v != 0); });
  } else if (dtype == "UINT8") {
    EachElement<uint8_t>(raw, w, [](Writer* o, uint8_t v) { o->Uint(v); });
  } else if (dtype == "UINT16") {
    EachElement<uint16_t>(raw, w, [](Writer* o, uint16_t v) { o->Uint(v); });
  } else if (dtype == "UINT32") {
    EachElement<uint32_t>(raw, w, [](Writer* o, uint32_t v) { o->Uint(v); });
  } else if (dtype == "UINT64") {
    EachElement<uint64_t>(raw, w, [](Writer* o, uint64_t v) { o->Uint64(v); });
  } else if (dtype == "INT8") {
    EachElement<int8_t>(raw, w, [](Writer* o, int8_t v) { o->Int(v); });
  } else if (dtype == "INT16") {
    EachElement<int16_t>(raw, w, [](Writer* o, int16_t v) { o->Int(v); });
  } else if (dtype == "INT32") {
    EachElement<int32_t>(raw, w, [](Writer* o, int32_t v) { o->Int(v); });
  } else if (dtype == "INT64") {
    EachElement<int64_t>(raw, w, [](Writer* o, int64_t v) { o->Int64(v); });
  } else if (dtype == "FP32") {
    EachElement<float>(raw, w, [](Writer* o, float v) { o->Double(v); });
  } else if (dtype == "FP64") {
    EachElement<double>(raw, w, [](Writer* o, double v) { o->Double(v); });
  } else {
    return false;
  }
  return true;
}

}  // namespace ndserve::protocol

#endif  // NDSERVE_PROTOCOL_JSON_NUMBERS_H_
