#ifndef NDSERVE_KERNELS_PLANS_H_
#define NDSERVE_KERNELS_PLANS_H_

// Index plans shared by the CPU and CUDA kernels: the device-independent part of each
// kernel, computed from shapes that InferOutputs has already validated. Adjacent dims
// that can be walked as one are merged, so the common cases reach the kernels as one or
// two dims. Plain values, built per call.

#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "kernels/op_attrs.h"
#include "kernels/tensor_view.h"

namespace ndserve::kernels {

// Elementwise walk over `out` reading up to three operands broadcast to it. Element i of
// the output sits at multi-index (i0..in) of `dims`; operand x is read at
// sum(ik * x_strides[k]). After merging, the innermost stride of each operand is 1 or 0
// (broadcast).
struct BroadcastPlan {
  Shape dims;  // empty: a single element
  Shape a_strides;
  Shape b_strides;
  Shape c_strides;  // only from the three-operand MakeBroadcastPlan (Where)
  int64_t numel = 0;
};
// `b` may be empty-ranked and unused (pass a_shape twice for a unary broadcast copy).
BroadcastPlan MakeBroadcastPlan(ShapeSpan out, ShapeSpan a, ShapeSpan b);
BroadcastPlan MakeBroadcastPlan(ShapeSpan out, ShapeSpan a, ShapeSpan b, ShapeSpan c);

// C = alpha * op(A) * op(B): row-major M x K times K x N.
struct GemmPlan {
  int64_t m = 0, n = 0, k = 0;
};
GemmPlan MakeGemmPlan(ShapeSpan a, ShapeSpan b, const GemmAttrs& attrs);

// numpy matmul: batch dims broadcast; rank-1 operands are promoted and the promoted dim
// dropped from the output.
struct MatMulPlan {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;      // number of M x N products
  Shape batch_dims;       // merged batch dims of the output
  Shape a_batch_strides;  // element strides per batch dim, 0 where A is broadcast
  Shape b_batch_strides;
  // B has no batch dims: A's batch folds into M, one (batch*M) x K by K x N product.
  bool fold_batch_into_m = false;
};
MatMulPlan MakeMatMulPlan(ShapeSpan a, ShapeSpan b);

// A tensor split around one axis: [outer, axis_dim, inner].
struct AxisPlan {
  int64_t outer = 1, axis_dim = 1, inner = 1;
};
AxisPlan MakeAxisPlan(ShapeSpan shape, int64_t axis);  // axis already normalized

// Reduction over a subset of dims, output contiguous over the kept dims in input order.
struct ReducePlan {
  Shape dims;                            // merged input dims
  absl::InlinedVector<bool, 6> reduced;  // per merged dim
  Shape in_strides;                      // input element strides per merged dim
  Shape out_strides;                     // output strides per merged dim, 0 if reduced
  int64_t out_numel = 1;
  int64_t reduce_numel = 1;  // input elements summed into each output
};
// `axes` normalized and unique; empty means no reduction (identity).
ReducePlan MakeReducePlan(ShapeSpan in, absl::Span<const int64_t> axes);

// A ReducePlan's merged dims split into the kept ones (in output order) and the reduced
// ones, each with its input strides: output o reads x[kept(o) + reduced(r)] for r <
// reduce_numel, both offsets from a multi-index over their dims.
struct ReduceSplit {
  Shape kept_dims, kept_strides, reduced_dims, reduced_strides;
};
ReduceSplit SplitReducePlan(const ReducePlan& p);

// Output element with multi-index (i0..in) over `out_dims` reads input element
// sum(ik * in_strides[k]).
struct TransposePlan {
  Shape out_dims;
  Shape in_strides;
  int64_t numel = 0;
};
TransposePlan MakeTransposePlan(ShapeSpan in, absl::Span<const int64_t> perm);  // perm valid

// ScatterND over data [d0, ..., dr-1] with indices [..., k]: `tuples` index tuples of k
// coordinates, each naming a slice of `slice` elements; slice_strides[i] is how many
// slices coordinate i steps over.
struct ScatterNDPlan {
  int64_t tuples = 0;
  int64_t k = 0;
  int64_t slice = 1;
  absl::InlinedVector<int64_t, 6> dims;           // d0 .. dk-1
  absl::InlinedVector<int64_t, 6> slice_strides;  // per coordinate
};
ScatterNDPlan MakeScatterNDPlan(ShapeSpan data, ShapeSpan indices);  // validated shapes

// GatherElements / ScatterElements: `count` indices of shape `index_dims` (rank of data,
// no dim larger than data's but along `axis`), each naming a position along `axis` of
// data. The index at coordinates c reaches data element
// sum over d != axis of c[d] * data_strides[d], plus index * data_strides[axis].
// Indices along one line of the axis (`lines` of them, `index_dims[axis]` long, `inner`
// apart in the indices) are the only ones that can reach the same element.
struct ElementsPlan {
  int64_t axis = 0;
  int64_t axis_dim = 0;  // data's size along axis
  int64_t count = 0;
  int64_t lines = 0;
  int64_t inner = 1;  // elements of indices per step along axis
  absl::InlinedVector<int64_t, 6> index_dims;
  absl::InlinedVector<int64_t, 6> data_strides;
};
// Validated shapes; `axis` normalized.
ElementsPlan MakeElementsPlan(ShapeSpan data, ShapeSpan indices, int64_t axis);

// DepthToSpace and SpaceToDepth as one transpose of a rank-6 view of X (N, C, H, W),
// whose output bytes are Y's (validated attributes and shape).
struct DepthSpaceView {
  Shape dims;  // X viewed as this
  absl::InlinedVector<int64_t, 6> perm;
};
DepthSpaceView MakeDepthSpaceView(const DepthSpaceAttrs& attrs, ShapeSpan x);

// Normalized Transpose perm (empty = reverse).
absl::InlinedVector<int64_t, 6> ResolvePerm(const TransposeAttrs& attrs, int64_t rank);

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_PLANS_H_
