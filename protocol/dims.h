#ifndef NDSERVE_PROTOCOL_DIMS_H_
#define NDSERVE_PROTOCOL_DIMS_H_

// Tensor dimensions as people type them on command lines ("1x3x224x224", "-1x64") and as
// messages print them ("[1,3,224,224]"): the one parser the CLI, the load generator and
// the server share.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ndserve::protocol {

struct DimsRules {
  // Character between dimensions.
  char separator = 'x';
  // -1 stands for a dimension filled in later (the load generator's batch).
  bool allow_wildcard = false;
  // 0 is a dimension (an empty tensor).
  bool allow_zero = true;
};

// "2x3" -> {2, 3}. INVALID_ARGUMENT quoting `text` and the bad dimension for an empty
// text, an empty or non-numeric dimension, or one the rules exclude.
absl::StatusOr<std::vector<int64_t>> ParseDims(absl::string_view text, DimsRules rules = {});

// {2, 3} -> "[2,3]".
std::string FormatDims(absl::Span<const int64_t> dims);

// The product of `dims`: INVALID_ARGUMENT for a negative dimension or when the product
// overflows int64 (never allocate from such a shape).
absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> dims);

}  // namespace ndserve::protocol

#endif  // NDSERVE_PROTOCOL_DIMS_H_
