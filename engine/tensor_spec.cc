#include "engine/tensor_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ndserve::engine {

std::string DimsToString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::string TensorSpec::ToString() const {
  return absl::StrCat(name, " ", DTypeName(dtype), any_rank ? "[*]" : DimsToString(dims));
}

bool ShapeMatches(const TensorSpec& spec, absl::Span<const int64_t> shape) {
  if (spec.any_rank) return true;
  if (spec.dims.size() != shape.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (spec.dims[i] != kAnyDim && spec.dims[i] != shape[i]) return false;
  }
  return true;
}

}  // namespace ndserve::engine
