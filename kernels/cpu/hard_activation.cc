// HardSigmoid and HardSwish over FP32 arrays: the nodes' loops and the conv epilogue's
// (late_activation.h). Built with -ffp-contract=off (kernels/CMakeLists.txt), so alpha * x
// + beta stays a multiply and an add in every ISA clone: the AVX-512 and AVX2 clones give
// the baseline's bits, and a conv with a fused HardSwish gives the bits of the Conv node
// followed by the HardSwish node. Compiled for the baseline only, mobilenet_v3_small's
// HardSwish epilogues ran four floats at a time: 14 % of its run on one thread.
#include <cstdint>

#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/late_activation.h"
#include "kernels/math_ops.h"

namespace ndserve::kernels::cpu {

NDS_CPU_CLONES_V4
void HardSigmoidArray(const float* x, float* y, int64_t n, float alpha, float beta) {
  const HardSigmoidOp op{alpha, beta};
  for (int64_t i = 0; i < n; ++i) y[i] = op(x[i]);
}

NDS_CPU_CLONES_V4
void HardSwishArray(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = HardSwishOp()(x[i]);
}

}  // namespace ndserve::kernels::cpu
