// ReduceL2, ReduceSumSquare, ReduceLogSumExp and ReduceProd on the CPU: one output at a
// time, its values read through the split plan's offsets and folded by
// kernels/math_ops.h's FoldReduceValues, as the CUDA kernel does. These ops sit at a
// model's ends (F.normalize's ReduceL2, a logsumexp over classes), so a walk per output
// costs little.
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/integer_reduce.h"
#include "kernels/math_ops.h"
#include "kernels/plans.h"
#include "kernels/shape_inference.h"

namespace ndserve::kernels::cpu {
namespace {

// The input offset of multi-index `i` (flattened over dims) under strides.
int64_t OffsetOf(int64_t i, const Shape& dims, const Shape& strides) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

struct Values {
  const float* base;
  const ReduceSplit* split;
  float operator()(int64_t r) const {
    return base[OffsetOf(r, split->reduced_dims, split->reduced_strides)];
  }
};

absl::Status Fold(OpKind op, FoldReduce kind, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const std::vector<int64_t> axes =
      *ResolveReduceAxes(std::get<ReduceAttrs>(attrs), in[0].shape.size(), OpKindName(op));
  const float* x = in[0].as<const float>();
  float* y = out[0].as<float>();
  const ReducePlan p = MakeReducePlan(in[0].shape, axes);
  const ReduceSplit split = SplitReducePlan(p);
  const int64_t reduce_n = in[0].numel() == 0 ? 0 : p.reduce_numel;
  for (int64_t o = 0; o < p.out_numel; ++o) {
    const Values values{x + (reduce_n == 0 ? 0 : OffsetOf(o, split.kept_dims, split.kept_strides)),
                        &split};
    y[o] = FoldReduceValues(kind, reduce_n, values);
  }
  return absl::OkStatus();
}

// Integer sums and products wrap on overflow, as the CUDA kernels' do (math_ops.h).
template <typename T, typename Op>
absl::Status IntFold(OpKind op, T init, absl::Span<const TensorView> in,
                     absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const std::vector<int64_t> axes = *ResolveReduceAxes(std::get<ReduceAttrs>(attrs),
                                                       in[0].shape.size(), OpKindName(op));
  const T* x = in[0].as<const T>();
  T* y = out[0].as<T>();
  const ReducePlan p = MakeReducePlan(in[0].shape, axes);
  const ReduceSplit split = SplitReducePlan(p);
  const int64_t reduce_n = in[0].numel() == 0 ? 0 : p.reduce_numel;
  for (int64_t o = 0; o < p.out_numel; ++o) {
    const T* base = x + (reduce_n == 0 ? 0 : OffsetOf(o, split.kept_dims, split.kept_strides));
    T acc = init;
    for (int64_t r = 0; r < reduce_n; ++r) {
      acc = Op()(acc, base[OffsetOf(r, split.reduced_dims, split.reduced_strides)]);
    }
    y[o] = acc;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReduceL2(const KernelContext&, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Fold(OpKind::kReduceL2, FoldReduce::kL2, in, out, attrs);
}
absl::Status ReduceSumSquare(const KernelContext&, absl::Span<const TensorView> in,
                             absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Fold(OpKind::kReduceSumSquare, FoldReduce::kSumSquare, in, out, attrs);
}
absl::Status ReduceLogSumExp(const KernelContext&, absl::Span<const TensorView> in,
                             absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Fold(OpKind::kReduceLogSumExp, FoldReduce::kLogSumExp, in, out, attrs);
}
absl::Status ReduceProd(const KernelContext&, absl::Span<const TensorView> in,
                        absl::Span<const TensorView> out, const OpAttrs& attrs) {
  if (in[0].dtype == DType::kInt64) {
    return IntFold<int64_t, WrappingProdOp>(OpKind::kReduceProd, 1, in, out, attrs);
  }
  if (in[0].dtype == DType::kInt32) {
    return IntFold<int32_t, WrappingProdOp>(OpKind::kReduceProd, 1, in, out, attrs);
  }
  return Fold(OpKind::kReduceProd, FoldReduce::kProd, in, out, attrs);
}
absl::Status ReduceL1(const KernelContext&, absl::Span<const TensorView> in,
                      absl::Span<const TensorView> out, const OpAttrs& attrs) {
  return Fold(OpKind::kReduceL1, FoldReduce::kL1, in, out, attrs);
}

absl::Status IntegerReduceSum(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                              const OpAttrs& attrs) {
  if (in[0].dtype == DType::kInt64) {
    return IntFold<int64_t, WrappingSumOp>(OpKind::kReduceSum, 0, in, out, attrs);
  }
  return IntFold<int32_t, WrappingSumOp>(OpKind::kReduceSum, 0, in, out, attrs);
}

}  // namespace ndserve::kernels::cpu
