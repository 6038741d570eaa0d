#ifndef NDSERVE_KERNELS_CONV_ACTIVATION_H_
#define NDSERVE_KERNELS_CONV_ACTIVATION_H_

// The activation a Conv applies to each output element after its bias, in the kernel's
// epilogue: what engine/fusion.h's FuseConvActivation folds a following Relu, Clip,
// HardSwish or Sigmoid node, or a SiLU pair (Sigmoid and Mul of the conv's output), into, so the conv's output is written once and never read
// back by a separate pass (docs/design.md section 4). The functors are math_ops.h's and
// elementwise_ops.h's, so a fused conv is bit-for-bit the unfused pair on either device.
// Plain C++17 (nvcc compiles it); a plain value.

#include <limits>

#include "kernels/elementwise_ops.h"
#include "kernels/math_ops.h"

namespace ndserve::kernels {

// kSilu: x * Sigmoid(x), what PyTorch's nn.SiLU exports as (a Sigmoid node and a Mul).
enum class ConvActivation : int { kNone = 0, kRelu, kClip, kHardSwish, kSigmoid, kSilu };

// Node attributes the fusion writes on a Conv (no ONNX attribute has these names):
// the activation's op_type as a string ("Relu", "Clip", "HardSwish", "Sigmoid", or "Silu"
// for the Sigmoid and Mul pair) and,
// for Clip, its bounds as floats (absent: unbounded on that side).
inline constexpr char kConvActivationAttr[] = "ndserve.activation";
inline constexpr char kConvActivationMinAttr[] = "ndserve.activation_min";
inline constexpr char kConvActivationMaxAttr[] = "ndserve.activation_max";

// kNone's functor, for the CPU conv loops that are instantiated once per activation
// functor (depthwise_conv_kxk.cc, direct_conv.cc, winograd_conv.cc).
struct IdentityOp {
  NDS_HD_OP float operator()(float x) const { return x; }
};

struct ConvEpilogue {
  ConvActivation kind = ConvActivation::kNone;
  float lo = -std::numeric_limits<float>::infinity();  // kClip only
  float hi = std::numeric_limits<float>::infinity();   // kClip only

  NDS_HD_OP float operator()(float x) const {
    switch (kind) {
      case ConvActivation::kRelu:
        return ReluOp()(x);
      case ConvActivation::kClip:
        return ClipOp{lo, hi}(x);
      case ConvActivation::kHardSwish:
        return HardSwishOp()(x);
      case ConvActivation::kSigmoid:
        return SigmoidOp()(x);
      case ConvActivation::kSilu:
        return x * SigmoidOp()(x);
      case ConvActivation::kNone:
        break;
    }
    return x;
  }
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_CONV_ACTIVATION_H_
