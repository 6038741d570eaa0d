#ifndef NDSERVE_KERNELS_TENSOR_VIEW_H_
#define NDSERVE_KERNELS_TENSOR_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "memory/device.h"
#include "memory/dtype.h"

namespace ndserve::kernels {

// Dimensions of a tensor, outermost first; a scalar has none. Six inline slots cover the
// models we serve without touching the heap.
using Shape = absl::InlinedVector<int64_t, 6>;
using ShapeSpan = absl::Span<const int64_t>;

// In an output shape InferOutputs gives for an op whose output dims depend on its input
// values (kOpDataShape, ops.def): a dim the kernel decides when it runs.
inline constexpr int64_t kDataDependentDim = -1;

// Type and shape without data: what shape inference reads and produces. A plain value.
struct TensorDesc {
  DType dtype = DType::kFp32;
  Shape shape;

  std::string ToString() const;  // "FP32[2,3]"
  friend bool operator==(const TensorDesc& a, const TensorDesc& b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
};

// A non-owning view of a dense, C-ordered (row-major, contiguous) tensor on one device.
// Ownership: the caller owns the buffer and keeps it alive until the kernel's work is
// done (on CUDA: until the stream has run it). Kernels never free or keep views. A plain
// value; copying it copies the pointer, not the data. `data` may be null only when the
// tensor has no elements.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFp32;
  Shape shape;
  Device device;

  int64_t numel() const;
  std::size_t nbytes() const;
  TensorDesc desc() const { return TensorDesc{dtype, shape}; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// Product of the dimensions (1 for a scalar). Assumes ValidateShape passed.
int64_t NumElements(ShapeSpan shape);
// Row-major element strides.
Shape ContiguousStrides(ShapeSpan shape);
// "[2,3,4]"; a scalar is "[]".
std::string ShapeToString(ShapeSpan shape);
// Every dimension is >= 0 and the element count fits in int64.
absl::Status ValidateShape(ShapeSpan shape, absl::string_view what);
// Maps an ONNX axis in [-rank, rank) onto [0, rank); INVALID_ARGUMENT naming `what`.
absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, absl::string_view what);

// ONNX multidirectional (numpy) broadcasting of two shapes; INVALID_ARGUMENT naming both
// shapes when a dimension pair is neither equal nor contains a 1.
absl::StatusOr<Shape> BroadcastShapes(ShapeSpan a, ShapeSpan b);
// True when `from` broadcasts to exactly `to` (ONNX unidirectional broadcasting).
bool IsUnidirectionallyBroadcastable(ShapeSpan from, ShapeSpan to);
// Strides of a tensor of shape `in` read as `out` (which it broadcasts to): `in`'s
// row-major strides, right-aligned to out's rank, 0 where `in` has no or a size-1 dim.
Shape BroadcastStrides(ShapeSpan in, ShapeSpan out);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_TENSOR_VIEW_H_
