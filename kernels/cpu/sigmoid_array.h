#ifndef NDSERVE_KERNELS_CPU_SIGMOID_ARRAY_H_
#define NDSERVE_KERNELS_CPU_SIGMOID_ARRAY_H_

// The one host loop that computes Sigmoid: the Sigmoid node and every CPU conv with a
// fused Sigmoid or SiLU call it on their outputs. Its polynomial (elementwise_ops.h's HostSigmoid)
// is contracted into FMAs in the AVX2 and AVX-512 clones, and a fused conv must give the
// node's bits; one function, whose clone is picked once per process, makes sure of that.
// Internal to kernels/cpu.

#include <cstdint>

#include "kernels/conv_activation.h"

namespace ndserve::kernels::cpu {

// y[i] = Sigmoid(x[i]) for i < n; y may be x.
void SigmoidArray(const float* x, float* y, int64_t n);

// y[i] = x[i] * Sigmoid(x[i]) for i < n (SiLU), y may be x: SigmoidArray's values times x,
// the bits of the Sigmoid node followed by the Mul node.
void SiluArray(const float* x, float* y, int64_t n);

// y = act(y) over n floats for a fused Sigmoid or SiLU, and true; false for the other
// activations.
bool SigmoidFamilyInPlace(ConvActivation kind, float* y, int64_t n);

// The activation functor the conv loops' copy-out takes for a fused Sigmoid or SiLU: it
// stores bias + sum as with no activation, then calls SigmoidFamilyInPlace on what it
// stored.
struct SigmoidArrayOp {
  ConvActivation kind;
};

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_SIGMOID_ARRAY_H_
