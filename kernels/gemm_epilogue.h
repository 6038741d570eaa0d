#ifndef NDSERVE_KERNELS_GEMM_EPILOGUE_H_
#define NDSERVE_KERNELS_GEMM_EPILOGUE_H_

// What a fused Gemm or MatMul node applies to each element of its product before it is
// stored (engine/fusion.h makes such nodes at load; docs/design.md section 4): a
// per-column bias and then an activation. The activation functors are the ones the
// standalone Relu, Clip and Erf kernels use, evaluated in the same order as the graph
// the fusion replaced, so a fused node computes what the unfused nodes did. Plain C++17
// (nvcc compiles it); shared by the CPU and CUDA kernels.

#include <cstdint>

#include "kernels/elementwise_ops.h"
#include "kernels/math_ops.h"

namespace ndserve::kernels {

enum class GemmActivation : int32_t {
  kNone,
  kRelu,
  // ClipOp{p0, p1}.
  kClip,
  // The exporters' erf GELU, exactly as PyTorch writes 0.5 * x * (1 + erf(x / sqrt 2)):
  // (x * p0) * (erf(x / p1) + p2), with the constants read from the fused graph.
  kGelu,
  // DivOp()(x, p0): a Div by a scalar after the product, as attention's scores are
  // scaled by sqrt(head size); the same division the standalone Div does.
  kDiv,
};

struct GemmEpilogue {
  GemmActivation activation = GemmActivation::kNone;
  float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f;

  NDS_HD_OP float operator()(float x) const {
    switch (activation) {
      case GemmActivation::kNone:
        return x;
      case GemmActivation::kRelu:
        return ReluOp()(x);
      case GemmActivation::kClip:
        return ClipOp{p0, p1}(x);
      case GemmActivation::kGelu:
        return (x * p0) * (ErfOp()(x / p1) + p2);
      case GemmActivation::kDiv:
        return DivOp()(x, p0);
    }
    return x;
  }
};

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_GEMM_EPILOGUE_H_
