#include "kernels/rules/rule_util.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ndserve::kernels::rules {

absl::Status Invalid(OpKind op, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(OpKindName(op), ": ", message));
}

absl::Status CheckInputCount(OpKind op, absl::Span<const TensorDesc> in, std::size_t min,
                             std::size_t max) {
  if (in.size() < min || in.size() > max) {
    return Invalid(
        op, min == max ? absl::StrFormat("expects %d inputs, got %d", min, in.size())
                       : absl::StrFormat("expects %d to %d inputs, got %d", min, max, in.size()));
  }
  return absl::OkStatus();
}

absl::Status CheckDType(OpKind op, const TensorDesc& t, absl::string_view what,
                        std::initializer_list<DType> allowed) {
  if (std::find(allowed.begin(), allowed.end(), t.dtype) != allowed.end()) {
    return absl::OkStatus();
  }
  std::string names;
  for (DType d : allowed) absl::StrAppend(&names, names.empty() ? "" : ", ", DTypeName(d));
  return absl::UnimplementedError(absl::StrFormat("%s: %s has type %s; supported: %s",
                                                  OpKindName(op), what, DTypeName(t.dtype), names));
}

absl::Status CheckDType(OpKind op, const TensorDesc& t, std::size_t index,
                        std::initializer_list<DType> allowed) {
  if (std::find(allowed.begin(), allowed.end(), t.dtype) != allowed.end()) {
    return absl::OkStatus();
  }
  return CheckDType(op, t, absl::StrCat("input ", index), allowed);
}

absl::Status CheckFixedSize(OpKind op, const TensorDesc& t, absl::string_view what) {
  if (DTypeIsFixedSize(t.dtype)) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrFormat("%s: %s has type %s, which has no fixed size",
                                                  OpKindName(op), what, DTypeName(t.dtype)));
}

absl::StatusOr<bool> GetBoolAttr(OpKind op, const AttrMap& attrs, absl::string_view name,
                                 bool fallback) {
  NDS_ASSIGN_OR_RETURN(int64_t v, GetAttr<int64_t>(op, attrs, name, fallback ? 1 : 0));
  return v != 0;
}

}  // namespace ndserve::kernels::rules
