// cuBLASLt products with a fused bias and Relu (gemm_lt.h). Like the cuBLAS path in
// gemm.cc, the row-major Y = op(A) op(B) is computed as the column-major
// Y^T = op(B)^T op(A)^T, so B is cuBLASLt's first operand and a bias per column of Y is a
// bias per row of Y^T, which is what cuBLASLt's BIAS epilogue adds.
#include "kernels/cuda/gemm_lt.h"

#include <cublasLt.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "kernels/cuda/cublas_util.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/gpu_resources.h"

namespace ndserve::kernels::gpu {
namespace {

// Everything cuBLASLt's heuristic looks at, so one choice serves every call that matches.
struct AlgoKey {
  int device;
  int64_t m, n, k;
  bool trans_a, trans_b, tf32;
  int32_t epilogue;
  uint32_t align_a, align_b, align_y;
  uint64_t workspace;

  friend bool operator==(const AlgoKey&, const AlgoKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const AlgoKey& k) {
    return H::combine(std::move(h), k.device, k.m, k.n, k.k, k.trans_a, k.trans_b, k.tf32,
                      k.epilogue, k.align_a, k.align_b, k.align_y, k.workspace);
  }
};

// The heuristic's first choice per key (nullopt: it had none). Process-wide, since the
// choice depends on the device and the call, not on a handle; bounded, cleared when full
// (a model has a few dozen product shapes, so only a stream of new shapes fills it).
class AlgoCache {
 public:
  static AlgoCache& Get() {
    static auto* cache = new AlgoCache;
    return *cache;
  }
  bool Find(const AlgoKey& key, std::optional<cublasLtMatmulAlgo_t>* algo) {
    absl::MutexLock lock(&mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    *algo = it->second;
    return true;
  }
  void Put(const AlgoKey& key, std::optional<cublasLtMatmulAlgo_t> algo) {
    absl::MutexLock lock(&mu_);
    if (map_.size() >= kMaxEntries) map_.clear();
    map_[key] = algo;
  }

 private:
  static constexpr std::size_t kMaxEntries = 4096;
  absl::Mutex mu_;
  absl::flat_hash_map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>> map_ ABSL_GUARDED_BY(mu_);
};

// The largest power of two up to 256 that divides the address: cuBLASLt's heuristic
// assumes 256-byte alignment unless told less, and an algorithm chosen for more than a
// buffer has fails or reads wrongly.
uint32_t AlignmentOf(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 4 && v % a != 0) a /= 2;
  return a;
}

// Owns one call's descriptors.
struct LtDescs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, y = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  LtDescs() = default;
  LtDescs(const LtDescs&) = delete;
  LtDescs& operator=(const LtDescs&) = delete;
  ~LtDescs() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    if (y != nullptr) cublasLtMatrixLayoutDestroy(y);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

template <typename T>
absl::Status SetOp(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const T& v) {
  return CublasStatus(cublasLtMatmulDescSetAttribute(op, attr, &v, sizeof(v)),
                      "cublasLtMatmulDescSetAttribute");
}

template <typename T>
absl::Status SetPref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                     const T& v) {
  return CublasStatus(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof(v)),
                      "cublasLtMatmulPreferenceSetAttribute");
}

}  // namespace

absl::StatusOr<bool> TryLtProduct(const KernelContext& ctx, const LtProduct& p) {
  if (ctx.cublaslt_handle == nullptr) return false;
  const bool relu = p.activation == GemmActivation::kRelu;
  if (p.activation != GemmActivation::kNone && !relu) return false;
  // A plain product is one cuBLAS kernel already; only a fused bias or Relu gains.
  if (p.bias == nullptr && !relu) return false;
  if (p.bias != nullptr && AlignmentOf(p.bias) < 16) return false;
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return false;
  NDS_RETURN_IF_ERROR(CheckIntDims("Gemm", p.m, p.n, p.k));
  const cublasLtEpilogue_t epilogue =
      p.bias != nullptr ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                        : CUBLASLT_EPILOGUE_RELU;
  const auto lt = static_cast<cublasLtHandle_t>(ctx.cublaslt_handle);

  LtDescs d;
  NDS_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmulDescCreate(&d.op, ctx.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                               CUDA_R_32F),
      "cublasLtMatmulDescCreate"));
  const cublasOperation_t op_first = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  NDS_RETURN_IF_ERROR(SetOp(d.op, CUBLASLT_MATMUL_DESC_TRANSA, op_first));
  NDS_RETURN_IF_ERROR(SetOp(d.op, CUBLASLT_MATMUL_DESC_TRANSB, op_second));
  NDS_RETURN_IF_ERROR(SetOp(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue));
  if (p.bias != nullptr) {
    NDS_RETURN_IF_ERROR(
        SetOp(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(p.bias)));
  }
  // Column-major layouts of the stored matrices: B (k x n row-major, or n x k when
  // transposed), A (m x k, or k x m) and Y^T (n x m).
  const uint64_t b_rows = p.trans_b ? p.k : p.n, b_cols = p.trans_b ? p.n : p.k;
  const uint64_t a_rows = p.trans_a ? p.m : p.k, a_cols = p.trans_a ? p.k : p.m;
  NDS_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatrixLayoutCreate(&d.a, CUDA_R_32F, b_rows, b_cols, static_cast<int64_t>(b_rows)),
      "cublasLtMatrixLayoutCreate"));
  NDS_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatrixLayoutCreate(&d.b, CUDA_R_32F, a_rows, a_cols, static_cast<int64_t>(a_rows)),
      "cublasLtMatrixLayoutCreate"));
  NDS_RETURN_IF_ERROR(CublasStatus(cublasLtMatrixLayoutCreate(&d.y, CUDA_R_32F, p.n, p.m, p.n),
                                   "cublasLtMatrixLayoutCreate"));

  const AlgoKey key{ctx.device.ordinal,
                    p.m,
                    p.n,
                    p.k,
                    p.trans_a,
                    p.trans_b,
                    ctx.tf32,
                    static_cast<int32_t>(epilogue),
                    AlignmentOf(p.a),
                    AlignmentOf(p.b),
                    AlignmentOf(p.y),
                    ctx.cublas_workspace_bytes};
  std::optional<cublasLtMatmulAlgo_t> algo;
  if (!AlgoCache::Get().Find(key, &algo)) {
    NDS_RETURN_IF_ERROR(
        CublasStatus(cublasLtMatmulPreferenceCreate(&d.pref), "cublasLtMatmulPreferenceCreate"));
    NDS_RETURN_IF_ERROR(SetPref(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, key.workspace));
    NDS_RETURN_IF_ERROR(SetPref(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b));
    NDS_RETURN_IF_ERROR(SetPref(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a));
    NDS_RETURN_IF_ERROR(SetPref(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_y));
    NDS_RETURN_IF_ERROR(SetPref(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt, d.op, d.a, d.b, d.y, d.y, d.pref, 1, &result, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
      algo = result.algo;
    }
    AlgoCache::Get().Put(key, algo);
  }
  if (!algo.has_value()) return false;
  const float beta = 0.0f;
  NDS_RETURN_IF_ERROR(CublasStatus(
      cublasLtMatmul(lt, d.op, &p.alpha, p.b, d.a, p.a, d.b, &beta, p.y, d.y, p.y, d.y, &*algo,
                     ctx.cublas_workspace, ctx.cublas_workspace_bytes, StreamOf(ctx)),
      "cublasLtMatmul"));
  CountCublasLtEpilogueGemm();
  return true;
}

}  // namespace ndserve::kernels::gpu
