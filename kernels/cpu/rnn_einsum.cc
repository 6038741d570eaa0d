// Einsum on the CPU as einsum_plan.h lowers it: operand transposes into ctx.scratch when
// an operand is in neither GEMM order, one cblas_sgemm per batch index, and a transpose
// of the product when the output's letter order is not [batch, M, N].
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/strided_gather.h"
#include "kernels/einsum_plan.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

void TransposeFloats(const float* x, ShapeSpan shape, ShapeSpan perm, float* y) {
  StridedGather(x, y, MakeTransposePlan(shape, perm));
}

absl::StatusOr<float*> Scratch(const KernelContext& ctx, int64_t n) {
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError("Einsum: the kernel context has no scratch");
  }
  NDS_ASSIGN_OR_RETURN(void* p, ctx.scratch->Allocate(std::max<int64_t>(n, 1) * sizeof(float)));
  return static_cast<float*>(p);
}

// The operand in its GEMM order: itself, or a transposed copy in scratch.
absl::StatusOr<const float*> Arrange(const KernelContext& ctx, const TensorView& t,
                                     const EinsumOperand& op) {
  if (op.perm.empty()) return t.as<const float>();
  NDS_ASSIGN_OR_RETURN(float* copy, Scratch(ctx, t.numel()));
  TransposeFloats(t.as<const float>(), t.shape, op.perm, copy);
  return copy;
}

}  // namespace

absl::Status Einsum(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const std::vector<TensorDesc> descs = [&] {
    std::vector<TensorDesc> d;
    for (const TensorView& t : in) d.push_back(t.desc());
    return d;
  }();
  NDS_ASSIGN_OR_RETURN(const EinsumPlan p, MakeEinsumPlan(std::get<EinsumAttrs>(attrs), descs));
  float* y = out[0].as<float>();
  if (out[0].numel() == 0) return absl::OkStatus();
  if (p.num_inputs == 1) {
    if (p.out_perm.empty()) {
      std::memcpy(y, in[0].data, in[0].nbytes());
    } else {
      TransposeFloats(in[0].as<const float>(), in[0].shape, p.out_perm, y);
    }
    return absl::OkStatus();
  }
  if (p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX) {
    return absl::UnimplementedError(absl::StrCat("Einsum: matrix dimensions ", p.m, "x", p.n, "x",
                                                 p.k, " exceed the BLAS int range"));
  }
  float* c = y;
  if (!p.out_perm.empty()) {
    NDS_ASSIGN_OR_RETURN(c, Scratch(ctx, out[0].numel()));
  }
  if (p.k == 0) {
    std::fill(c, c + p.batch * p.m * p.n, 0.0f);
  } else {
    NDS_ASSIGN_OR_RETURN(const float* a, Arrange(ctx, in[0], p.a));
    NDS_ASSIGN_OR_RETURN(const float* b, Arrange(ctx, in[1], p.b));
    for (int64_t i = 0; i < p.batch; ++i) {
      cblas_sgemm(CblasRowMajor, p.a.transposed ? CblasTrans : CblasNoTrans,
                  p.b.transposed ? CblasTrans : CblasNoTrans, static_cast<int>(p.m),
                  static_cast<int>(p.n), static_cast<int>(p.k), 1.0f, a + i * p.m * p.k,
                  static_cast<int>(p.a.transposed ? p.m : p.k), b + i * p.k * p.n,
                  static_cast<int>(p.b.transposed ? p.k : p.n), 0.0f, c + i * p.m * p.n,
                  static_cast<int>(p.n));
    }
  }
  if (!p.out_perm.empty()) TransposeFloats(c, p.mid_shape, p.out_perm, y);
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
