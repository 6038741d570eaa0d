#include "kernels/plans.h"

#include <algorithm>

namespace ndserve::kernels {
namespace {

// Drops size-1 dims and merges dim i into i+1 wherever every operand walks the pair as one
// contiguous run (stride[i] == stride[i+1] * dims[i+1], which also holds for 0 strides).
void MergeDims(Shape& dims, absl::Span<Shape* const> strides) {
  Shape d;
  absl::InlinedVector<Shape, 3> s(strides.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    bool merge = !d.empty();
    for (std::size_t k = 0; merge && k < strides.size(); ++k) {
      merge = s[k].back() == (*strides[k])[i] * dims[i];
    }
    if (merge) {
      d.back() *= dims[i];
      for (std::size_t k = 0; k < strides.size(); ++k) s[k].back() = (*strides[k])[i];
    } else {
      d.push_back(dims[i]);
      for (std::size_t k = 0; k < strides.size(); ++k) s[k].push_back((*strides[k])[i]);
    }
  }
  dims = std::move(d);
  for (std::size_t k = 0; k < strides.size(); ++k) *strides[k] = std::move(s[k]);
}

}  // namespace

BroadcastPlan MakeBroadcastPlan(ShapeSpan out, ShapeSpan a, ShapeSpan b) {
  BroadcastPlan plan;
  plan.dims.assign(out.begin(), out.end());
  plan.a_strides = BroadcastStrides(a, out);
  plan.b_strides = BroadcastStrides(b, out);
  plan.numel = NumElements(out);
  Shape* strides[] = {&plan.a_strides, &plan.b_strides};
  MergeDims(plan.dims, strides);
  return plan;
}

BroadcastPlan MakeBroadcastPlan(ShapeSpan out, ShapeSpan a, ShapeSpan b, ShapeSpan c) {
  BroadcastPlan plan;
  plan.dims.assign(out.begin(), out.end());
  plan.a_strides = BroadcastStrides(a, out);
  plan.b_strides = BroadcastStrides(b, out);
  plan.c_strides = BroadcastStrides(c, out);
  plan.numel = NumElements(out);
  Shape* strides[] = {&plan.a_strides, &plan.b_strides, &plan.c_strides};
  MergeDims(plan.dims, strides);
  return plan;
}

GemmPlan MakeGemmPlan(ShapeSpan a, ShapeSpan b, const GemmAttrs& attrs) {
  GemmPlan plan;
  plan.m = attrs.trans_a ? a[1] : a[0];
  plan.k = attrs.trans_a ? a[0] : a[1];
  plan.n = attrs.trans_b ? b[0] : b[1];
  return plan;
}

MatMulPlan MakeMatMulPlan(ShapeSpan a, ShapeSpan b) {
  MatMulPlan plan;
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  plan.m = a_vec ? 1 : a[a.size() - 2];
  plan.k = a.back();
  plan.n = b_vec ? 1 : b.back();
  const ShapeSpan a_batch = a_vec ? ShapeSpan() : a.subspan(0, a.size() - 2);
  const ShapeSpan b_batch = b_vec ? ShapeSpan() : b.subspan(0, b.size() - 2);
  // Validated by InferOutputs, so broadcasting cannot fail here.
  const Shape out_batch = *BroadcastShapes(a_batch, b_batch);
  plan.batch = NumElements(out_batch);
  plan.fold_batch_into_m = b_batch.empty();
  // Batch strides in units of whole matrices, then scaled to elements.
  plan.batch_dims.assign(out_batch.begin(), out_batch.end());
  plan.a_batch_strides = BroadcastStrides(a_batch, out_batch);
  plan.b_batch_strides = BroadcastStrides(b_batch, out_batch);
  for (int64_t& s : plan.a_batch_strides) s *= plan.m * plan.k;
  for (int64_t& s : plan.b_batch_strides) s *= plan.k * plan.n;
  Shape* strides[] = {&plan.a_batch_strides, &plan.b_batch_strides};
  MergeDims(plan.batch_dims, strides);
  return plan;
}

AxisPlan MakeAxisPlan(ShapeSpan shape, int64_t axis) {
  AxisPlan plan;
  for (int64_t i = 0; i < axis; ++i) plan.outer *= shape[i];
  plan.axis_dim = shape[axis];
  for (std::size_t i = axis + 1; i < shape.size(); ++i) plan.inner *= shape[i];
  return plan;
}

ReducePlan MakeReducePlan(ShapeSpan in, absl::Span<const int64_t> axes) {
  ReducePlan plan;
  const Shape in_strides = ContiguousStrides(in);
  // Output strides over the kept dims (row-major over kept dims in input order).
  Shape out_strides(in.size(), 0);
  int64_t s = 1;
  for (int i = static_cast<int>(in.size()) - 1; i >= 0; --i) {
    if (std::find(axes.begin(), axes.end(), i) != axes.end()) {
      plan.reduce_numel *= in[i];
    } else {
      out_strides[i] = s;
      s *= in[i];
    }
  }
  plan.out_numel = s;
  // Merge runs of dims that are all kept or all reduced and contiguous in both.
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == 1) continue;
    const bool red = out_strides[i] == 0;
    if (!plan.dims.empty() && plan.reduced.back() == red &&
        plan.in_strides.back() == in_strides[i] * in[i] &&
        plan.out_strides.back() == out_strides[i] * in[i]) {
      plan.dims.back() *= in[i];
      plan.in_strides.back() = in_strides[i];
      plan.out_strides.back() = out_strides[i];
    } else {
      plan.dims.push_back(in[i]);
      plan.reduced.push_back(red);
      plan.in_strides.push_back(in_strides[i]);
      plan.out_strides.push_back(out_strides[i]);
    }
  }
  return plan;
}

absl::InlinedVector<int64_t, 6> ResolvePerm(const TransposeAttrs& attrs, int64_t rank) {
  absl::InlinedVector<int64_t, 6> perm(attrs.perm.begin(), attrs.perm.end());
  if (perm.empty()) {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  return perm;
}

ReduceSplit SplitReducePlan(const ReducePlan& p) {
  ReduceSplit s;
  for (std::size_t d = 0; d < p.dims.size(); ++d) {
    (p.reduced[d] ? s.reduced_dims : s.kept_dims).push_back(p.dims[d]);
    (p.reduced[d] ? s.reduced_strides : s.kept_strides).push_back(p.in_strides[d]);
  }
  return s;
}

ScatterNDPlan MakeScatterNDPlan(ShapeSpan data, ShapeSpan indices) {
  ScatterNDPlan p;
  p.k = indices.back();
  p.tuples = NumElements(indices.subspan(0, indices.size() - 1));
  p.slice = NumElements(data.subspan(p.k));
  p.dims.assign(data.begin(), data.begin() + p.k);
  p.slice_strides.resize(p.k);
  int64_t stride = 1;
  for (int64_t i = p.k - 1; i >= 0; --i) {
    p.slice_strides[i] = stride;
    stride *= data[i];
  }
  return p;
}

ElementsPlan MakeElementsPlan(ShapeSpan data, ShapeSpan indices, int64_t axis) {
  ElementsPlan p;
  p.axis = axis;
  p.axis_dim = data[axis];
  p.count = NumElements(indices);
  p.index_dims.assign(indices.begin(), indices.end());
  p.data_strides.resize(data.size());
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(data.size()) - 1; d >= 0; --d) {
    p.data_strides[d] = stride;
    stride *= data[d];
  }
  p.inner = NumElements(indices.subspan(axis + 1));
  p.lines = indices[axis] == 0 ? 0 : p.count / indices[axis];
  return p;
}

DepthSpaceView MakeDepthSpaceView(const DepthSpaceAttrs& a, ShapeSpan x) {
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3], b = a.blocksize;
  if (!a.to_space) {
    // [N, C, H/b, b, W/b, b] -> [N, b, b, C, H/b, W/b]
    return {Shape{n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4}};
  }
  if (a.crd) {
    // [N, C/b^2, b, b, H, W] -> [N, C/b^2, H, b, W, b]
    return {Shape{n, c / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3}};
  }
  // DCR: [N, b, b, C/b^2, H, W] -> [N, C/b^2, H, b, W, b]
  return {Shape{n, b, b, c / (b * b), h, w}, {0, 3, 4, 1, 5, 2}};
}

TransposePlan MakeTransposePlan(ShapeSpan in, absl::Span<const int64_t> perm) {
  TransposePlan plan;
  const Shape in_strides = ContiguousStrides(in);
  for (int64_t p : perm) {
    plan.out_dims.push_back(in[p]);
    plan.in_strides.push_back(in_strides[p]);
  }
  plan.numel = NumElements(in);
  // The output side is contiguous by construction; merge where the input is too.
  Shape out_strides = ContiguousStrides(plan.out_dims);
  Shape* strides[] = {&plan.in_strides, &out_strides};
  MergeDims(plan.out_dims, strides);
  return plan;
}

}  // namespace ndserve::kernels
