#ifndef NDSERVE_KERNELS_CPU_LATE_ACTIVATION_H_
#define NDSERVE_KERNELS_CPU_LATE_ACTIVATION_H_

// The activations a CPU conv applies after storing its sums, with the node's own loops:
// HardSwish, Sigmoid and SiLU. Inside an FMA clone their multiply-adds (HardSwish's, and
// the Sigmoid polynomial of elementwise_ops.h's HostSigmoid) would be contracted, and a
// fused conv must give the bits of the conv followed by the activation nodes. So every
// conv path calls these out-of-line loops on what it stored: the very loops the HardSwish
// and Sigmoid nodes run, whose clones are picked once per process. Internal to kernels/cpu.

#include <cstdint>

#include "kernels/conv_activation.h"

namespace ndserve::kernels::cpu {

// y[i] = HardSigmoid(x[i]) = clamp(alpha * x[i] + beta, 0, 1), and y[i] = HardSwish(x[i]),
// for i < n; y may be x. The nodes' loops (hard_activation.cc: no FMA in any ISA clone).
void HardSigmoidArray(const float* x, float* y, int64_t n, float alpha, float beta);
void HardSwishArray(const float* x, float* y, int64_t n);

// y[i] = Sigmoid(x[i]) for i < n; y may be x. The Sigmoid node's loop.
void SigmoidArray(const float* x, float* y, int64_t n);

// y[i] = x[i] * Sigmoid(x[i]) for i < n (SiLU), y may be x: SigmoidArray's values times x,
// the bits of the Sigmoid node followed by the Mul node.
void SiluArray(const float* x, float* y, int64_t n);

// y = act(y) over n floats for kHardSwish, kSigmoid and kSilu, and true; false (y
// untouched) for the activations the conv loops apply in registers.
bool LateActivationInPlace(ConvActivation kind, float* y, int64_t n);

// The activation functor the conv loops' copy-out takes for those three: it stores
// bias + sum as with no activation, then calls LateActivationInPlace on what it stored.
struct LateActivationOp {
  ConvActivation kind;
};

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_LATE_ACTIVATION_H_
