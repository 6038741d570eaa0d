#ifndef NDSERVE_ENGINE_TENSOR_SPEC_H_
#define NDSERVE_ENGINE_TENSOR_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "memory/dtype.h"

namespace ndserve::engine {

// Wildcard dimension in a declared shape: any size (ONNX symbolic dims, Triton's -1).
inline constexpr int64_t kAnyDim = -1;

// Declared name, element type and shape of a model input or output. `dims` may hold
// kAnyDim; `any_rank` means the model declares no shape at all (then `dims` is empty and
// any rank is accepted). A plain value.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kFp32;
  std::vector<int64_t> dims;
  bool any_rank = false;

  // "input FP32[-1,64]" ("[*]" for any rank).
  std::string ToString() const;
};

// "[2,-1,3]".
std::string DimsToString(absl::Span<const int64_t> dims);

// Whether a concrete `shape` matches `spec`'s dims (kAnyDim matches any size).
bool ShapeMatches(const TensorSpec& spec, absl::Span<const int64_t> shape);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_TENSOR_SPEC_H_
