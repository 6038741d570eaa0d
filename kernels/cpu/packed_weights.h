#ifndef NDSERVE_KERNELS_CPU_PACKED_WEIGHTS_H_
#define NDSERVE_KERNELS_CPU_PACKED_WEIGHTS_H_

// Which nodes' CPU kernels take a weight packed at load (kernels/cpu/packed_gemm.h), and
// its packing. The engine asks once per node when a CPU model loads and hands the result
// to every call of that node (KernelContext::packed_weight); a kernel that gets none, or
// one whose dims do not match its call, takes its OpenBLAS path (docs/design.md §4.4).

#include <memory>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/op_attrs.h"
#include "kernels/op_kind.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels::cpu {

// The input of `op` whose constant value can be packed: 1 (W of Conv with one group, B of
// Gemm with alpha 1, B of MatMul), or -1 when the node has no packed path.
int PackableWeightInput(OpKind op, const OpAttrs& attrs);

// `weight` (host FP32, the node's input PackableWeightInput) packed the way the node's
// kernel reads it: Conv W [M, C, kh, kw] as the A side (M x C*kh*kw), with a Winograd
// packing beside it where WinogradWeightSuits (winograd_conv.h), Gemm B ([K, N], or
// [N, K] with transB) and a rank-2 MatMul B as the B side. Null when the weight does not
// suit (another dtype or rank).
std::unique_ptr<PackedMatrix> PackNodeWeight(OpKind op, const OpAttrs& attrs,
                                             const TensorView& weight);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_PACKED_WEIGHTS_H_
