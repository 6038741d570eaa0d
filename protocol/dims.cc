#include "protocol/dims.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ndserve::protocol {

absl::StatusOr<std::vector<int64_t>> ParseDims(absl::string_view text, DimsRules rules) {
  if (text.empty()) return absl::InvalidArgumentError("empty dims");
  std::vector<int64_t> dims;
  for (absl::string_view d : absl::StrSplit(text, rules.separator)) {
    int64_t dim = 0;
    const bool parsed = absl::SimpleAtoi(d, &dim);
    const bool allowed = parsed && (dim > 0 || (dim == 0 && rules.allow_zero) ||
                                    (dim == -1 && rules.allow_wildcard));
    if (!allowed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dims '", text, "': dimension '", d, "' is not ",
          rules.allow_zero ? "a non-negative integer" : "a positive integer",
          rules.allow_wildcard ? " or -1" : ""));
    }
    dims.push_back(dim);
  }
  return dims;
}

std::string FormatDims(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

absl::StatusOr<int64_t> ElementCount(absl::Span<const int64_t> dims) {
  // Negative dimensions first, so that [0,-1] is reported as negative, not as empty.
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", FormatDims(dims), " has a negative dimension"));
    }
  }
  int64_t n = 1;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(n, d, &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", FormatDims(dims), " has too many elements (overflow)"));
    }
  }
  return n;
}

}  // namespace ndserve::protocol
