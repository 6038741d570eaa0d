#ifndef NDSERVE_KERNELS_OP_ATTRS_H_
#define NDSERVE_KERNELS_OP_ATTRS_H_

#include <cstdint>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/attrs/conv.h"
#include "kernels/attrs/data.h"
#include "kernels/attrs/detection.h"
#include "kernels/attrs/math.h"
#include "kernels/attrs/rnn.h"
#include "kernels/attrs/shape_of.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/op_kind.h"
#include "memory/dtype.h"

namespace ndserve::kernels {

// Resolved attributes of one node, one struct per op family. Host inputs (ops.def: inputs
// that decide an output's shape, such as Reshape's shape or Squeeze's axes) are folded in
// here as values and are NOT passed to kernels as tensors: the engine reads them on the
// host, from initializers when the model loads or from the host-side shape arithmetic per
// request. BuildOpAttrs (node_attrs.h) fills these from an ONNX node through the rules of
// kernels/rules/. Axes may be negative (ONNX style); kernels normalize them. Plain values.
// A new family adds its struct here and to the OpAttrs variant.

// Add, Sub, Mul, Div, (unfused) MatMul, Relu, Sigmoid, Tanh, Erf, Identity.
struct NoAttrs {};
// Gemm, and a MatMul the load-time fusion gave a bias or activation (a plain MatMul has
// NoAttrs; a fused one keeps alpha = beta = 1 and no transposes).
struct GemmAttrs {
  float alpha = 1.0f;
  float beta = 1.0f;
  bool trans_a = false;
  bool trans_b = false;
  // Applied to the result (after C); only engine/fusion.h sets it, through the internal
  // attributes kFusedActivationAttr and kFusedActivationParamsAttr.
  GemmEpilogue epilogue;
  // MatMul only: a third input, a 1-D [N] bias added to every row of the product
  // (kFusedMatMulBiasAttr).
  bool matmul_bias = false;
};
// The internal attributes of fused Gemm / MatMul nodes. No ONNX attribute has these names
// and the loader refuses them in files. Activation: "Relu", "Clip", "Gelu" or "Div" (params
// as GemmEpilogue's p0..p2); bias: INT 1.
inline constexpr char kFusedActivationAttr[] = "ndserve.activation";
inline constexpr char kFusedActivationParamsAttr[] = "ndserve.activation_params";
inline constexpr char kFusedMatMulBiasAttr[] = "ndserve.matmul_bias";
struct SoftmaxAttrs {
  int64_t axis = -1;
};
// Normalizes over dims [axis, rank). Scale and B must have the shape X.shape[axis:]
// (leading 1s allowed). Statistics are always computed in FP32 (stash_type 1).
struct LayerNormAttrs {
  int64_t axis = -1;
  float epsilon = 1e-5f;
};
struct GatherAttrs {
  int64_t axis = 0;
  // An embedding bag fused at load (engine/fusion.h, FuseEmbeddingBags): the rows of an
  // FP32 table [rows, dim] that a bag of ids picks, averaged, as Gather + ReduceMean over
  // the bag axis computed them: output [batch, dim]. The indices are [batch, bag], or
  // with `bag_select` >= 0 [batch, features, bag] of which only feature `bag_select` is
  // read (the Gather that selected it is folded too). Set only through the internal
  // attributes kFusedBagMeanAttr and kFusedBagSelectAttr.
  bool bag_mean = false;
  int64_t bag_select = -1;
};
inline constexpr char kFusedBagMeanAttr[] = "ndserve.bag_mean";
inline constexpr char kFusedBagSelectAttr[] = "ndserve.bag_select";
// ReduceSum / ReduceMean. Empty `axes` reduces every dim unless noop_with_empty_axes,
// in which case the op is an identity.
struct ReduceAttrs {
  std::vector<int64_t> axes;
  bool keepdims = true;
  bool noop_with_empty_axes = false;
};
struct ConcatAttrs {
  int64_t axis = 0;
};
// 0 copies the input's dim (unless allowzero), one -1 is inferred.
struct ReshapeAttrs {
  std::vector<int64_t> shape;
  bool allowzero = false;
};
struct FlattenAttrs {
  int64_t axis = 1;
};
// Empty perm reverses the dims.
struct TransposeAttrs {
  std::vector<int64_t> perm;
};
// Empty axes squeezes every dim of size 1.
struct SqueezeAttrs {
  std::vector<int64_t> axes;
};
// Axes index the output's dims.
struct UnsqueezeAttrs {
  std::vector<int64_t> axes;
};
struct CastAttrs {
  DType to = DType::kFp32;
};

// One alternative per struct, grouped by family; the last line closes the list.
using OpAttrs = std::variant<
    NoAttrs, GemmAttrs, SoftmaxAttrs, LayerNormAttrs, GatherAttrs, ReduceAttrs, ConcatAttrs,
    ReshapeAttrs, FlattenAttrs, TransposeAttrs, SqueezeAttrs, UnsqueezeAttrs,
    // kernels/attrs/math.h
    ActivationAttrs,
    ClipAttrs,
    ModAttrs,
    FloatClassAttrs,
    ArgMaxAttrs,
    TopKAttrs,
    CumSumAttrs,

    // kernels/attrs/data.h
    SliceAttrs,
    ExpandAttrs,
    ConstantOfShapeAttrs,
    RangeAttrs,
    TileAttrs,
    SplitAttrs,
    PadAttrs,
    TriluAttrs,
    DepthSpaceAttrs,
    ScatterNDAttrs,
    ElementsAttrs,
    OneHotAttrs,
    GatherNDAttrs,
    ShapeAttrs,

    // kernels/attrs/conv.h
    ConvAttrs,
    PoolAttrs,
    BatchNormAttrs,
    ResizeAttrs,
    GridSampleAttrs,

    // kernels/attrs/rnn.h
    RecurrentAttrs, EinsumAttrs,

    // kernels/attrs/detection.h
    NmsAttrs,
    RoiAlignAttrs,

    CastAttrs>;

// The attribute struct `op` expects, or INVALID_ARGUMENT when `attrs` holds another one
// (an engine bug, reported instead of crashing).
template <typename T>
absl::Status GetAttrs(OpKind op, const OpAttrs& attrs, const T** out) {
  *out = std::get_if<T>(&attrs);
  if (*out == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: wrong attribute struct (variant index %d)", OpKindName(op), attrs.index()));
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_OP_ATTRS_H_
