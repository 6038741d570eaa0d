#ifndef NDSERVE_ENGINE_FUSION_H_
#define NDSERVE_ENGINE_FUSION_H_

// Load-time rewrites of a GraphDef, applied before Graph::Build validates it (see
// LoadOnnxGraph). Each keeps the graph's outputs equal up to float rounding.

#include "absl/status/statusor.h"
#include "engine/graph.h"

namespace ndserve::engine {

// Folds each BatchNormalization (inference) into the Conv that feeds it: with
// a = scale / sqrt(var + epsilon), the conv's weights become W[m] * a[m] and its bias
// (B[m] - mean[m]) * a[m] + bias[m], and the pair becomes that one Conv. It applies only
// where the rewrite is exact: the BN's first input is a default-domain Conv's output that
// nothing else reads and that is no graph output; the BN's four parameters and the
// conv's W (and B, if given) are FP32 initializers of the right shapes; the BN is not in
// training mode and has no statistics outputs. The folded parameters are new initializers
// (the originals may be shared), and ones left unread are dropped by Graph::Build.
// Returns how many pairs were fused; anything it does not recognise is left as it is, so
// it never fails on a graph Graph::Build would accept. Not thread-safe on one `def`.
absl::StatusOr<int> FuseConvBatchNorm(GraphDef* def);

// Folds each Relu, Clip, HardSwish or Sigmoid that directly follows a Conv, and each SiLU
// as PyTorch exports it (Mul of the Conv's output and a Sigmoid of it, the Conv's output
// read by those two alone), into that Conv as its epilogue activation (kernels/conv_activation.h: the kernel applies it to
// each band of output while it is still in cache, instead of a second pass over the whole
// tensor). Exact on every device: the fused kernels apply the very functors the unfused
// ops do. It applies only where the activation's input is a default-domain Conv's only
// output, read by nothing else and no graph output, and the Conv carries no activation
// yet; a Clip's bounds must be absent or one-element FP32 initializers (Constants count:
// the loader turns them into initializers). The activation node goes away and the Conv
// writes its output (a SiLU's Sigmoid and Mul both go). Run it after FuseConvBatchNorm,
// so Conv + BN + Relu becomes one node. Returns how many activations were fused; never fails on a graph Graph::Build
// would accept. Not thread-safe on one `def`.
absl::StatusOr<int> FuseConvActivation(GraphDef* def);
// Folds the bias and activation that follow a Gemm or MatMul into that node, so the
// product, bias and activation are one kernel call (kernels/gemm_epilogue.h, on the CPU
// and on CUDA). Two rewrites, each applied only where it is exact:
//  - MatMul + Add of a bias (PyTorch's nn.Linear on inputs of rank > 2): the Add's other
//    input is a 1-D FP32 initializer [N] and the MatMul's B an FP32 initializer whose
//    last dim is N, so the bias is one value per output column. The MatMul takes the
//    bias as a third input (kernels::kFusedMatMulBiasAttr).
//  - Gemm or MatMul + activation: Relu; Clip whose bounds are absent or FP32 scalar
//    initializers; the erf GELU as PyTorch exports it, Mul(Mul(x, a), Add(Erf(Div(x,
//    d)), c)) with scalar FP32 initializers a, d, c (operands of Mul and Add in either
//    order), evaluated in that same order; and Div(x, d) with d a scalar FP32 initializer
//    (attention's scaling of Q x K^T; the CPU applies it to each block of scores while
//    it is in cache). The activation becomes kernels::kFusedActivationAttr.
// Every intermediate value a rewrite removes must have no reader outside the pattern and
// not be a graph output. Returns how many nodes were folded away; anything it does not
// recognise is left as it is. Not thread-safe on one `def`.
absl::StatusOr<int> FuseGemmEpilogues(GraphDef* def);

// Folds each embedding bag, Gather(table, ids) then ReduceMean over axis 1 with keepdims
// 0, into that Gather (kernels::kFusedBagMeanAttr): the rows a bag picks are summed and
// scaled as the pair did, without the [batch, bag, dim] rows in between, on the CPU to
// the same bits. The table must be a 2-D FP32 initializer and the ids' rank known to be 2:
// a [batch, bag] graph input, or feature f of a [batch, features, bag] graph input picked
// by Gather(input, f, axis=1) with f a scalar integer initializer and features a fixed
// dim, which is folded too (kernels::kFusedBagSelectAttr). Every value the rewrite removes
// must have no other reader and not be a graph output. Returns how many bags were fused;
// anything it does not recognise is left as it is. Not thread-safe on one `def`.
absl::StatusOr<int> FuseEmbeddingBags(GraphDef* def);

}  // namespace ndserve::engine

#endif  // NDSERVE_ENGINE_FUSION_H_
