#ifndef NDSERVE_KERNELS_ATTRS_DATA_H_
#define NDSERVE_KERNELS_ATTRS_DATA_H_

// Attribute structs of the shape arithmetic and data movement ops (Shape, Slice, Expand, Pad,
// Where, ...). Plain values; see op_attrs.h for the conventions.

#include <cstdint>
#include <vector>

#include "memory/dtype.h"

namespace ndserve::kernels {

// One number as ONNX stored it: integer types keep their exact int64 value (a double would
// round INT64 values past 2^53), floating ones a double. Kernels convert it to the output's
// dtype (kernels/data_plans.h ScalarBits).
struct ScalarValue {
  bool is_real = true;
  double real = 0.0;
  int64_t integer = 0;
};

// As ONNX states them (host inputs 1-4); empty axes means 0..n-1, empty steps all 1.
// Clamping and negative indices are resolved against the data's shape (MakeSlicePlan).
struct SliceAttrs {
  std::vector<int64_t> starts;
  std::vector<int64_t> ends;
  std::vector<int64_t> axes;
  std::vector<int64_t> steps;
};

// The target shape (host input 1), broadcast bidirectionally with the input's.
struct ExpandAttrs {
  std::vector<int64_t> shape;
};

// The output shape (host input 0) and the fill value with its dtype (the one-element
// `value` TENSOR attribute; FP32 0 when absent).
struct ConstantOfShapeAttrs {
  std::vector<int64_t> shape;
  DType dtype = DType::kFp32;
  ScalarValue value;
};

// start, limit, delta (host inputs 0-2), all of `dtype`.
struct RangeAttrs {
  DType dtype = DType::kFp32;
  ScalarValue start, limit, delta;
};

// Repeats per dim (host input 1), one per input dim.
struct TileAttrs {
  std::vector<int64_t> repeats;
};

// Sizes along `axis` (host input 1); empty: split evenly into `num_outputs` parts.
struct SplitAttrs {
  int64_t axis = 0;
  std::vector<int64_t> split;
  int64_t num_outputs = 0;
};

enum class PadMode { kConstant, kReflect, kEdge };
// pads (host input 1): [x1_begin, x2_begin, ..., x1_end, x2_end, ...], negative crops.
// `value` (host input 2) fills in constant mode; 0 when absent.
struct PadAttrs {
  PadMode mode = PadMode::kConstant;
  std::vector<int64_t> pads;
  ScalarValue value{false, 0.0, 0};
};

// Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last two dims and
// zeroes the rest; k is host input 1.
struct TriluAttrs {
  bool upper = true;
  int64_t k = 0;
};

// ScatterND's reduction: how an update meets the element it lands on (opset 16; before
// it, always kNone).
enum class ScatterReduction { kNone = 0, kAdd = 1, kMul = 2 };  // the CUDA launcher's codes
struct ScatterNDAttrs {
  ScatterReduction reduction = ScatterReduction::kNone;
};

// GatherElements and ScatterElements (PyTorch's torch.gather and Tensor.scatter /
// scatter_add): the axis the indices run along, and ScatterElements' reduction (opset
// 16; kNone for GatherElements).
struct ElementsAttrs {
  int64_t axis = 0;
  ScatterReduction reduction = ScatterReduction::kNone;
};

// GatherND: slices of data picked by the last dim of indices (an index tuple of up to
// data's rank minus batch_dims numbers), the first `batch_dims` dims shared.
struct GatherNDAttrs {
  int64_t batch_dims = 0;
};

// OneHot (F.one_hot): `depth` classes inserted at `axis` of the indices' shape; the
// output, of `dtype` (the values input's: FP32, INT32 or INT64), is `on` where a class is
// its index (negative ones counting from the end) and `off` elsewhere. depth and values
// are host inputs 1 and 2.
struct OneHotAttrs {
  int64_t axis = -1;
  int64_t depth = 0;
  DType dtype = DType::kFp32;
  double off = 0.0, on = 1.0;
};

// DepthToSpace (mode DCR or CRD) and SpaceToDepth: blocks of blocksize x blocksize pixels
// to and from channels.
struct DepthSpaceAttrs {
  int64_t blocksize = 1;
  bool crd = false;       // DepthToSpace mode CRD (PyTorch's PixelShuffle), else DCR
  bool to_space = true;   // DepthToSpace; false: SpaceToDepth
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_ATTRS_DATA_H_
