#ifndef NDSERVE_KERNELS_CPU_SIGMOID_ARRAY_H_
#define NDSERVE_KERNELS_CPU_SIGMOID_ARRAY_H_

// The one host loop that computes Sigmoid: the Sigmoid node and every CPU conv with a
// fused Sigmoid call it on their outputs. Its polynomial (elementwise_ops.h's HostSigmoid)
// is contracted into FMAs in the AVX2 and AVX-512 clones, and a fused conv must give the
// node's bits; one function, whose clone is picked once per process, makes sure of that.
// Internal to kernels/cpu.

#include <cstdint>

namespace ndserve::kernels::cpu {

// y[i] = Sigmoid(x[i]) for i < n; y may be x.
void SigmoidArray(const float* x, float* y, int64_t n);

// The activation functor the conv loops' copy-out takes for a fused Sigmoid: it stores
// bias + sum as with no activation, then calls SigmoidArray on what it stored.
struct SigmoidArrayOp {};

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_SIGMOID_ARRAY_H_
