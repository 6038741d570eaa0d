// Gemm and MatMul on the CPU through OpenBLAS's cblas_sgemm (row-major), with the
// epilogue of fused nodes (kernels/gemm_epilogue.h) applied in one pass after the product.
// Batched MatMuls of small products (attention) take RowGemm on ParallelFor instead.
// A product of enough rows whose B the model packed at load (KernelContext::packed_weight)
// takes PackedGemm, with the epilogue applied per finished tile block (docs/design.md §4.4).
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <variant>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_gemm.h"
#include "kernels/cpu/row_walker.h"
#include "kernels/elementwise_ops.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/math_ops.h"
#include "kernels/plans.h"

namespace ndserve::kernels::cpu {
namespace {

// BLAS takes int dimensions; larger matrices are refused rather than truncated.
absl::Status CheckBlasDims(absl::string_view op, int64_t m, int64_t n, int64_t k) {
  if (m > INT_MAX || n > INT_MAX || k > INT_MAX) {
    return absl::UnimplementedError(
        absl::StrFormat("%s: matrix dimensions %dx%dx%d exceed the BLAS int range", op, m, n, k));
  }
  return absl::OkStatus();
}

// y[i,j] = beta * c[broadcast(i,j)]: Gemm's C term, written before the product is added.
void FillScaledBroadcast(const TensorView& c, float beta, float* y, int64_t m, int64_t n) {
  const Shape out = {m, n};
  const BroadcastPlan p = MakeBroadcastPlan(out, c.shape, c.shape);
  const float* src = c.as<const float>();
  if (p.dims.empty()) {
    std::fill(y, y + p.numel, beta * src[0]);
    return;
  }
  const int64_t inner = p.dims.back();
  const int64_t stride = p.a_strides.back();
  RowWalker<1> walk(p.dims, {ShapeSpan(p.a_strides)});
  for (int64_t row = 0; row < p.numel / inner; ++row, walk.Next()) {
    const float* s = src + walk.offset(0);
    float* d = y + row * inner;
    if (stride == 1) {
      for (int64_t i = 0; i < inner; ++i) d[i] = beta * s[i];
    } else {
      std::fill(d, d + inner, beta * s[0]);
    }
  }
}

// y = act(y + bias[col]) over a row-major rows x cols result, bias optional: the epilogue
// of a fused node, and Gemm's bias when it is one value per column. One pass, with the
// activation a template parameter so each case is its own vectorizable loop.
template <typename Act>
__attribute__((always_inline)) inline void EpilogueLoop(float* y, const float* bias, int64_t rows,
                                                        int64_t cols, Act act) {
  for (int64_t r = 0; r < rows; ++r) {
    float* yr = y + r * cols;
    if (bias != nullptr) {
      for (int64_t j = 0; j < cols; ++j) yr[j] = act(yr[j] + bias[j]);
    } else {
      for (int64_t j = 0; j < cols; ++j) yr[j] = act(yr[j]);
    }
  }
}

// Cloned here rather than on the EpilogueLoop template (clang clones no templates); the
// loops are inlined into each clone.
NDS_CPU_CLONES
void ApplyEpilogue(float* y, const float* bias, int64_t rows, int64_t cols, const GemmEpilogue& e) {
  switch (e.activation) {
    case GemmActivation::kNone:
      if (bias != nullptr) EpilogueLoop(y, bias, rows, cols, [](float x) { return x; });
      return;
    case GemmActivation::kRelu:
      EpilogueLoop(y, bias, rows, cols, ReluOp());
      return;
    case GemmActivation::kClip:
      EpilogueLoop(y, bias, rows, cols, ClipOp{e.p0, e.p1});
      return;
    case GemmActivation::kGelu: {
      // GemmEpilogue's own formula, spelled out: through its switch the loop stayed scalar.
      const float p0 = e.p0, p1 = e.p1, p2 = e.p2;
      EpilogueLoop(y, bias, rows, cols,
                   [p0, p1, p2](float x) { return (x * p0) * (HostErf(x / p1) + p2); });
      return;
    }
    case GemmActivation::kDiv: {
      const float d = e.p0;
      EpilogueLoop(y, bias, rows, cols, [d](float x) { return x / d; });
      return;
    }
  }
}

// Products up to this many multiply-adds, batched (attention's per-head scores and
// context), run as RowGemm row blocks spread over ParallelFor: one cblas_sgemm each
// paid OpenBLAS's packing and thread wakeup for a few microseconds of work (docs/design.md
// section 4).
constexpr int64_t kSmallProduct = int64_t{1} << 20;

// The batched product of MatMulProduct for small products, on ParallelFor's threads; with
// `epilogue`, each block's rows get act(y + bias) right after their product, while they
// are in the computing core's cache (attention's scores and their 1/sqrt(d) scaling).
absl::Status SmallBatchedMatMul(const MatMulPlan& p, const float* a, const float* b, float* y,
                                const float* bias, const GemmEpilogue* epilogue) {
  // Element offsets of A and B for batch index i, from the merged batch dims.
  auto offsets = [&p](int64_t i, int64_t* oa, int64_t* ob) {
    *oa = 0;
    *ob = 0;
    for (int64_t d = static_cast<int64_t>(p.batch_dims.size()) - 1; d >= 0; --d) {
      const int64_t idx = i % p.batch_dims[d];
      i /= p.batch_dims[d];
      *oa += idx * p.a_batch_strides[d];
      *ob += idx * p.b_batch_strides[d];
    }
  };
  // Work items are blocks of rows of one product, small enough to balance two threads
  // even when the batch is 1.
  const int64_t rows_per_item = std::min<int64_t>(p.m, 32);
  const int64_t items_per_product = (p.m + rows_per_item - 1) / rows_per_item;
  const int64_t macs_per_item = std::max<int64_t>(1, rows_per_item * p.n * p.k);
  ParallelFor(p.batch * items_per_product,
              std::max<int64_t>(1, (int64_t{64} << 10) / macs_per_item),
              [&](int64_t first, int64_t end) {
                for (int64_t item = first; item < end; ++item) {
                  const int64_t i = item / items_per_product;
                  const int64_t r0 = (item % items_per_product) * rows_per_item;
                  const int64_t rows = std::min(rows_per_item, p.m - r0);
                  int64_t oa, ob;
                  offsets(i, &oa, &ob);
                  float* yb = y + (i * p.m + r0) * p.n;
                  RowGemm(rows, p.n, p.k, a + oa + r0 * p.k, p.k, b + ob, p.n, yb, p.n);
                  if (epilogue != nullptr) ApplyEpilogue(yb, bias, rows, p.n, *epilogue);
                }
              });
  return absl::OkStatus();
}

// Y = A x B with numpy batch broadcasting. `*epilogue_done` says whether the product also
// applied `epilogue` (with `bias`) itself, as the small batched products do per block.
absl::Status MatMulProduct(absl::Span<const TensorView> in, absl::Span<const TensorView> out,
                           const float* bias, const GemmEpilogue* epilogue,
                           bool* epilogue_done) {
  *epilogue_done = false;
  const MatMulPlan p = MakeMatMulPlan(in[0].shape, in[1].shape);
  const float* a = in[0].as<const float>();
  const float* b = in[1].as<const float>();
  float* y = out[0].as<float>();
  const int64_t out_numel = p.batch * p.m * p.n;
  if (out_numel == 0) return absl::OkStatus();
  if (p.k == 0) {
    std::fill(y, y + out_numel, 0.0f);
    return absl::OkStatus();
  }
  if (p.fold_batch_into_m) {
    // B is one matrix: A's batch is just more rows.
    NDS_RETURN_IF_ERROR(CheckBlasDims("MatMul", p.batch * p.m, p.n, p.k));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(p.batch * p.m),
                static_cast<int>(p.n), static_cast<int>(p.k), 1.0f, a, static_cast<int>(p.k), b,
                static_cast<int>(p.n), 0.0f, y, static_cast<int>(p.n));
    return absl::OkStatus();
  }
  NDS_RETURN_IF_ERROR(CheckBlasDims("MatMul", p.m, p.n, p.k));
  if (p.m * p.n * p.k <= kSmallProduct) {
    *epilogue_done = true;
    return SmallBatchedMatMul(p, a, b, y, bias, epilogue);
  }
  // One product per batch index; the walker's "rows" are single batch entries, so walk
  // the batch dims with a trailing dim of 1.
  Shape dims = p.batch_dims, sa = p.a_batch_strides, sb = p.b_batch_strides;
  dims.push_back(1);
  sa.push_back(0);
  sb.push_back(0);
  RowWalker<2> walk(dims, {ShapeSpan(sa), ShapeSpan(sb)});
  for (int64_t i = 0; i < p.batch; ++i, walk.Next()) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(p.m),
                static_cast<int>(p.n), static_cast<int>(p.k), 1.0f, a + walk.offset(0),
                static_cast<int>(p.k), b + walk.offset(1), static_cast<int>(p.n), 0.0f,
                y + i * p.m * p.n, static_cast<int>(p.n));
  }
  return absl::OkStatus();
}

// OpenBLAS runs a GEMM of at most this many multiply-adds (m * n * k) on the calling
// thread alone: SMP_THRESHOLD_MIN (65536) times GEMM_MULTITHREAD_THRESHOLD (4, the
// default build's) in its interface/gemm.c.
constexpr double kBlasSingleThreadMacs = 65536.0 * 4;
// Up to this many multiply-adds, a Gemm is cut into row blocks OpenBLAS runs single-
// threaded, spread over ParallelFor's threads. OpenBLAS's own threads cost a wake-up and
// a spin-wait per call, which a product this small does not repay (mlp at batch 256: 2.3x
// slower with 2 OpenBLAS threads than with 1 on a loaded 2-core machine); larger products
// keep OpenBLAS's threading, whose blocking wins there.
constexpr double kRowBlockedMaxMacs = 64 * kBlasSingleThreadMacs;

// C is one value per column ([N] or [1, N]), so it can be added in the epilogue pass
// instead of being broadcast into Y before the product.
bool IsColumnBias(ShapeSpan c, int64_t n) {
  return (c.size() == 1 && c[0] == n) || (c.size() == 2 && c[0] == 1 && c[1] == n);
}

// Rows of the product from which the packed B is used. Below it the product is a few rows
// streaming B once (mlp at batch 1: 2 to 3 times ORT already), where the 6-row tiles
// would mostly multiply zeros; unless B is larger than L2 (a CNN's classifier at batch 1:
// 1280 x 1000 in mobilenet_v2), where OpenBLAS's repacking of B on every call, a pass
// over memory, costs more than the packed path (sgemm_incopy: 3.8 % of mobilenet_v2 b1
// with everything else packed); up to four rows that path is packed_gemv.h's stream.
constexpr int64_t kPackedMinRows = 32;
constexpr int64_t kPackedLargeB = int64_t{256} << 10;  // floats: 1 MB
// Columns of the product from which the packed B is used. Narrower, each 16-wide tile of
// the micro-kernel computes a few useful columns and many zeros: a scoring head's
// [256 x 32] x [32 x 1] (recsys b256) took 10 us that way, against one small sgemm call.
constexpr int64_t kPackedMinCols = 4;

// The packed B of this call, or null when there is none or it does not fit (K x N).
const PackedMatrix* PackedB(const KernelContext& ctx, int64_t m, int64_t n, int64_t k) {
  const PackedMatrix* b = ctx.packed_weight;
  if (b == nullptr || (m < kPackedMinRows && k * n < kPackedLargeB) || n < kPackedMinCols ||
      b->side() != PackedMatrix::Side::kB ||
      b->rows() != k || b->cols() != n) {
    return nullptr;
  }
  return b;
}

// Y [m x n] = A x packed B (+ Y when `accumulate`), then act(y + bias[col]) per finished
// block.
absl::Status PackedProduct(const KernelContext& ctx, const PackedMatrix& b, MatrixRef a,
                           int64_t m, int64_t n, int64_t k, bool accumulate, const float* bias,
                           const GemmEpilogue& e, float* y) {
  if (ctx.scratch == nullptr) {
    return absl::FailedPreconditionError("Gemm: the kernel context has no scratch allocator");
  }
  NDS_ASSIGN_OR_RETURN(void* scratch,
                       ctx.scratch->Allocate(PackedGemmScratchFloats(b, m, n, k) * sizeof(float)));
  PackedGemm(b, a, m, n, k, y, n, accumulate, static_cast<float*>(scratch),
             [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
               for (int64_t r = r0; r < r1; ++r) {
                 ApplyEpilogue(y + r * n + c0, bias != nullptr ? bias + c0 : nullptr, 1, c1 - c0,
                               e);
               }
             });
  return absl::OkStatus();
}

}  // namespace

absl::Status Gemm(const KernelContext& ctx, absl::Span<const TensorView> in,
                  absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const GemmAttrs& a = std::get<GemmAttrs>(attrs);
  const GemmPlan p = MakeGemmPlan(in[0].shape, in[1].shape, a);
  NDS_RETURN_IF_ERROR(CheckBlasDims("Gemm", p.m, p.n, p.k));
  float* y = out[0].as<float>();
  if (p.m == 0 || p.n == 0) return absl::OkStatus();
  // beta == 0 drops C entirely (as BLAS does), so NaNs in C do not leak through.
  const bool use_c = in.size() == 3 && a.beta != 0.0f;
  // The common case (nn.Linear: C is the bias, beta 1) adds C after the product, in the
  // same pass as any fused activation, rather than in a pass of its own before it.
  const bool column_bias = use_c && a.beta == 1.0f && IsColumnBias(in[2].shape, p.n);
  const bool c_in_gemm = use_c && !column_bias;
  const bool product = p.k > 0 && a.alpha != 0.0f;
  if (c_in_gemm) {
    FillScaledBroadcast(in[2], a.beta, y, p.m, p.n);
  } else if (!product) {
    std::fill(y, y + p.m * p.n, 0.0f);
  }
  const float* bias = column_bias ? in[2].as<const float>() : nullptr;
  const float* a_data = in[0].as<const float>();
  const int lda = static_cast<int>(a.trans_a ? p.m : p.k);
  if (const PackedMatrix* packed = PackedB(ctx, p.m, p.n, p.k);
      packed != nullptr && product && a.alpha == 1.0f) {
    return PackedProduct(ctx, *packed, MatrixRef{a_data, lda, a.trans_a}, p.m, p.n, p.k, c_in_gemm,
                         bias, a.epilogue, y);
  }
  const int ldb = static_cast<int>(a.trans_b ? p.k : p.n);
  // Rows [r0, r1) of Y: their product (A's rows, or A^T's: columns of A) and epilogue.
  auto rows = [&](int64_t r0, int64_t r1) {
    float* yr = y + r0 * p.n;
    if (product) {
      cblas_sgemm(CblasRowMajor, a.trans_a ? CblasTrans : CblasNoTrans,
                  a.trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(r1 - r0),
                  static_cast<int>(p.n), static_cast<int>(p.k), a.alpha,
                  a_data + (a.trans_a ? r0 : r0 * p.k), lda, in[1].as<const float>(), ldb,
                  c_in_gemm ? 1.0f : 0.0f, yr, static_cast<int>(p.n));
    }
    ApplyEpilogue(yr, bias, r1 - r0, p.n, a.epilogue);
  };
  const double row_macs = static_cast<double>(p.n) * static_cast<double>(p.k);
  const double macs = row_macs * static_cast<double>(p.m);
  if (product && macs > kBlasSingleThreadMacs && macs <= kRowBlockedMaxMacs &&
      row_macs <= kBlasSingleThreadMacs) {
    // Each block small enough that OpenBLAS keeps it on the thread that calls it, so
    // this BLAS call inside a ParallelFor body puts no second set of threads on the
    // cores (the rule of parallel.h is about threaded GEMMs).
    const auto block = static_cast<int64_t>(kBlasSingleThreadMacs / row_macs);
    ParallelFor(p.m, block, [&](int64_t r0, int64_t r1) {
      for (int64_t b = r0; b < r1; b += block) rows(b, std::min(r1, b + block));
    });
  } else {
    rows(0, p.m);
  }
  return absl::OkStatus();
}

absl::Status MatMul(const KernelContext& ctx, absl::Span<const TensorView> in,
                    absl::Span<const TensorView> out, const OpAttrs& attrs) {
  const GemmAttrs* fused_attrs = std::get_if<GemmAttrs>(&attrs);
  if (in[1].shape.size() == 2 && out[0].numel() > 0) {
    // B one matrix: A's batch is just more rows, as in MatMulProduct.
    const MatMulPlan p = MakeMatMulPlan(in[0].shape, in[1].shape);
    if (const PackedMatrix* packed = PackedB(ctx, p.batch * p.m, p.n, p.k);
        packed != nullptr && p.k > 0 && (p.fold_batch_into_m || p.batch == 1)) {
      const float* bias =
          fused_attrs != nullptr && fused_attrs->matmul_bias ? in[2].as<const float>() : nullptr;
      return PackedProduct(ctx, *packed, MatrixRef{in[0].as<const float>(), p.k, false},
                           p.batch * p.m, p.n, p.k, /*accumulate=*/false, bias,
                           fused_attrs != nullptr ? fused_attrs->epilogue : GemmEpilogue{},
                           out[0].as<float>());
    }
  }
  const float* fused_bias = fused_attrs != nullptr && fused_attrs->matmul_bias
                                ? in[2].as<const float>()
                                : nullptr;
  bool epilogue_done = false;
  NDS_RETURN_IF_ERROR(MatMulProduct(in, out, fused_bias,
                                    fused_attrs != nullptr ? &fused_attrs->epilogue : nullptr,
                                    &epilogue_done));
  // Otherwise a fused MatMul (engine/fusion.h) adds its bias and activation in one pass
  // after.
  if (const GemmAttrs* fused = fused_attrs; fused != nullptr && !epilogue_done) {
    const int64_t n = out[0].shape.empty() ? 1 : out[0].shape.back();
    const int64_t rows = n == 0 ? 0 : out[0].numel() / n;
    ApplyEpilogue(out[0].as<float>(), fused->matmul_bias ? in[2].as<const float>() : nullptr, rows,
                  n, fused->epilogue);
  }
  return absl::OkStatus();
}

}  // namespace ndserve::kernels::cpu
