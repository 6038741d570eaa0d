#ifndef NDSERVE_KERNELS_RULES_RULE_UTIL_H_
#define NDSERVE_KERNELS_RULES_RULE_UTIL_H_

// Helpers shared by the per-family rule files (kernels/rules/*.cc): error messages that
// name the op, input checks, and typed access to ONNX attributes with ONNX's defaults.

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/node_attrs.h"
#include "kernels/op_attrs.h"
#include "kernels/op_kind.h"
#include "kernels/tensor_view.h"
#include "base/status_macros.h"

namespace ndserve::kernels::rules {

using Descs = std::vector<TensorDesc>;

// INVALID_ARGUMENT "<Op>: <message>".
absl::Status Invalid(OpKind op, absl::string_view message);
absl::Status CheckInputCount(OpKind op, absl::Span<const TensorDesc> in, std::size_t min,
                             std::size_t max);
// UNIMPLEMENTED naming the supported types when t's dtype is not among `allowed`.
absl::Status CheckDType(OpKind op, const TensorDesc& t, absl::string_view what,
                        std::initializer_list<DType> allowed);
// The same for input `index` of the node ("input 2" in the message), the string built only
// on failure: these checks run on every request's every node.
absl::Status CheckDType(OpKind op, const TensorDesc& t, std::size_t index,
                        std::initializer_list<DType> allowed);
// UNIMPLEMENTED for BYTES (no fixed element size).
absl::Status CheckFixedSize(OpKind op, const TensorDesc& t, absl::string_view what);

// The attribute `name` as T, or nullopt when absent; INVALID_ARGUMENT for another type.
// An INT written where a FLOAT is expected is accepted (some writers do that).
template <typename T>
absl::StatusOr<std::optional<T>> FindAttr(OpKind op, const AttrMap& attrs,
                                          absl::string_view name) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return std::optional<T>();
  if (const T* v = std::get_if<T>(&it->second)) return std::optional<T>(*v);
  if constexpr (std::is_same_v<T, float>) {
    if (const int64_t* v = std::get_if<int64_t>(&it->second)) {
      return std::optional<T>(static_cast<float>(*v));
    }
  }
  return Invalid(op, absl::StrCat("attribute '", name, "' has the wrong type"));
}

template <typename T>
absl::StatusOr<T> GetAttr(OpKind op, const AttrMap& attrs, absl::string_view name, T fallback) {
  NDS_ASSIGN_OR_RETURN(std::optional<T> v, FindAttr<T>(op, attrs, name));
  return v.has_value() ? *std::move(v) : std::move(fallback);
}

template <typename T>
absl::StatusOr<T> RequireAttr(OpKind op, const AttrMap& attrs, absl::string_view name) {
  NDS_ASSIGN_OR_RETURN(std::optional<T> v, FindAttr<T>(op, attrs, name));
  if (!v.has_value()) {
    return Invalid(op, absl::StrCat("required attribute '", name, "' is missing"));
  }
  return *std::move(v);
}

absl::StatusOr<bool> GetBoolAttr(OpKind op, const AttrMap& attrs, absl::string_view name,
                                 bool fallback);

}  // namespace ndserve::kernels::rules

#endif  // NDSERVE_KERNELS_RULES_RULE_UTIL_H_
