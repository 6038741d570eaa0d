#ifndef NDSERVE_BASE_TEXT_H_
#define NDSERVE_BASE_TEXT_H_

// Text that came from a client or from a file on disk (model names, tensor names, request
// ids, config.pbtxt contents echoed in parser errors) may hold any bytes and any length.
// It must not reach a protobuf `string` field or a gRPC status message unchecked: a byte
// that is not UTF-8 makes strict decoders (Python's grpc, protobuf's own parser) refuse the
// whole reply, and a 100 KB name overflows gRPC's metadata limit so the client sees
// RESOURCE_EXHAUSTED instead of the real error (docs/design.md §5). Pure functions;
// thread-safe.

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ndserve {

// Longest model, tensor or request-id name a request or a repository may use. Longer
// names are refused up front with INVALID_ARGUMENT (they are never legitimate, and the
// echo of one in an error would be as long).
inline constexpr size_t kMaxNameBytes = 256;

// Longest status message sent to a client or text stored for one (e.g. a repository
// index reason). gRPC carries the message in a header, percent-encoding bytes beyond
// ASCII (3 bytes each), and its default metadata limit is 8 KiB.
inline constexpr size_t kMaxMessageBytes = 2048;

// True when `text` is well-formed UTF-8 (no overlong forms, no surrogates, nothing
// beyond U+10FFFF).
bool IsValidUtf8(absl::string_view text);

// `text` as valid UTF-8 of at most `max_bytes` bytes: every byte that does not start a
// well-formed sequence becomes U+FFFD, and text beyond the limit is cut at a character
// boundary and replaced by "...(N bytes)" naming the original length (the result,
// marker included, stays within `max_bytes` when max_bytes >= 32).
std::string SafeUtf8(absl::string_view text, size_t max_bytes = kMaxMessageBytes);

// A name as it may be quoted in an error or a log line: SafeUtf8 clipped to 64 bytes, so
// that an over-long name is recognisable but never dominates the message.
std::string ClipName(absl::string_view name);

// OK for a name of at most kMaxNameBytes that is valid UTF-8; otherwise INVALID_ARGUMENT
// naming `what` ("model name", "input name", "request id") and quoting the name clipped.
absl::Status CheckName(absl::string_view what, absl::string_view name);

}  // namespace ndserve

#endif  // NDSERVE_BASE_TEXT_H_
