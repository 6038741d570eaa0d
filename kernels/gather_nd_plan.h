// GatherND's walk, shared by the CPU and CUDA kernels so both read the same element for
// a tuple. Over data [b0..bB-1, c0..ck-1, s...] and indices [b0..bB-1, t..., k] (B =
// batch_dims), index tuple g (row-major over indices' dims but the last) lies in batch
// g / per_batch and starts the slice of `slice` elements at
//   (g / per_batch) * batch_stride + sum over i < k of coordinate_i * strides[i],
// a coordinate counting from the end of dims[i] when negative. The output is the slices
// in tuple order.
#ifndef NDSERVE_KERNELS_GATHER_ND_PLAN_H_
#define NDSERVE_KERNELS_GATHER_ND_PLAN_H_

#include <cstdint>

#include "kernels/tensor_view.h"

namespace ndserve::kernels {

struct GatherNDPlan {
  int64_t tuples = 0;     // all batches' index tuples
  int64_t per_batch = 0;  // index tuples in one batch
  int64_t batch_stride = 0;
  int64_t slice = 1;
  int64_t k = 0;
  Shape dims;     // data's dims batch_dims .. batch_dims + k - 1
  Shape strides;  // data's element strides of those dims
};

// Shapes as InferGatherND accepted them.
inline GatherNDPlan MakeGatherNDPlan(ShapeSpan data, ShapeSpan indices, int64_t batch_dims) {
  GatherNDPlan p;
  const int64_t b = batch_dims;
  p.k = indices.back();
  p.tuples = NumElements(indices.subspan(0, indices.size() - 1));
  p.per_batch = NumElements(indices.subspan(b, indices.size() - 1 - b));
  p.batch_stride = NumElements(data.subspan(b));
  p.slice = NumElements(data.subspan(b + p.k));
  p.dims.assign(data.begin() + b, data.begin() + b + p.k);
  p.strides.resize(p.k);
  int64_t stride = p.slice;
  for (int64_t i = p.k - 1; i >= 0; --i) {
    p.strides[i] = stride;
    stride *= p.dims[i];
  }
  return p;
}

}  // namespace ndserve::kernels

#endif  // NDSERVE_KERNELS_GATHER_ND_PLAN_H_
