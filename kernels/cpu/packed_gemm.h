#ifndef NDSERVE_KERNELS_CPU_PACKED_GEMM_H_
#define NDSERVE_KERNELS_CPU_PACKED_GEMM_H_

// A GEMM of our own for products with one constant operand (a Conv's filters, a Gemm's
// or MatMul's initializer weight): that operand is packed once, when the model loads,
// into the panels the micro-kernel reads; the other operand is packed per call, a slab
// at a time, by the thread that uses it, except a row-major A against a packed B, which
// the micro-kernel reads in place, and up to four rows of A, which take packed_gemv.h.
// OpenBLAS 0.3.21 repacks both operands on every
// call and its threads meet at a barrier inside each GEMM; here the tiles of C are split
// over ParallelFor's threads and the only sync is ParallelFor's join
// (docs/design.md section 4.4).
//
// Layout: K is cut into blocks of kPackKc (the last one shorter). A packed A [M x K] holds,
// per K block, ceil(M / kPackMr) panels of kPackMr rows, element (i, k) of a panel at
// k * kPackMr + i; a packed B [K x N] per K block ceil(N / kPackNr) panels of kPackNr
// columns, element (k, j) at k * kPackNr + j. Panels past the matrix's edge are zero.
//
// The micro-kernel (6 x 16 floats of C in twelve 8-wide registers) is compiled for AVX2 +
// FMA and for baseline x86-64 and picked at load (isa_clones.h); where the CPU has
// AVX-512, a 12 x 16 kernel in twelve 16-wide registers runs two A panels at once instead
// (micro_kernel_12x16.h). Reentrant.

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "kernels/conv_activation.h"

namespace ndserve::kernels::cpu {

inline constexpr int64_t kPackMr = 6;    // rows of a C tile (A panel height)
inline constexpr int64_t kPackNr = 16;   // columns of a C tile (B panel width)
inline constexpr int64_t kPackKc = 256;  // depth of a K block: a B panel is 16 KB

// A row-major matrix operand: element (r, c) at data[r * ld + c], or at data[c * ld + r]
// when `trans` (the operand is the transpose of what is stored).
struct MatrixRef {
  const float* data = nullptr;
  int64_t ld = 0;
  bool trans = false;

  float at(int64_t r, int64_t c) const { return trans ? data[c * ld + r] : data[r * ld + c]; }
};

// A constant operand in panel layout: the A side (rows() = M, cols() = K) or the B side
// (rows() = K, cols() = N). Owns its floats; immutable after packing.
class PackedMatrix {
 public:
  enum class Side { kA, kB };

  // `src` is rows x cols as that side sees it (M x K for A, K x N for B).
  static PackedMatrix Pack(Side side, MatrixRef src, int64_t rows, int64_t cols);

  Side side() const { return side_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // Its floats and its Winograd companion's.
  int64_t bytes() const;
  // A conv W's second packing for 3x3 stride-1 convs (winograd_conv.h), made at load
  // beside this one, or null.
  const PackedMatrix* winograd() const { return winograd_.get(); }
  void set_winograd(std::unique_ptr<const PackedMatrix> w) { winograd_ = std::move(w); }
  // The panel of K block [k0, k0 + kb) that holds row (A) or column (B) `index`.
  const float* Panel(int64_t k0, int64_t kb, int64_t index) const;

 private:
  Side side_ = Side::kA;
  int64_t rows_ = 0, cols_ = 0;
  int64_t padded_ = 0;  // M or N rounded up to whole panels
  std::vector<float> data_;
  std::unique_ptr<const PackedMatrix> winograd_;
};

// Called once per finished block of C, rows [r0, r1) and columns [c0, c1), after its
// last K block and while it is hot in cache: where bias and activation go. Runs on
// ParallelFor's threads, concurrently for disjoint blocks; must not call BLAS.
using PackedEpilogue = absl::FunctionRef<void(int64_t r0, int64_t r1, int64_t c0, int64_t c1)>;

// What the micro-kernel does to a tile of C in its registers after the tile's last K
// block, before its one store: add `bias[row]` (M floats; null: none), then `act`. A
// Conv's bias and fused activation cost no pass over C of their own this way, which at
// a pointwise conv's small K (16-64) is a large share of the product's time
// (docs/design.md section 4.4). `act` is kNone, kRelu or kClip (FusesActivation): their
// results are the scalar functors' to the bit, so a fused conv still equals the unfused
// pair. HardSwish (whose multiply-add the vector clones would contract into an FMA) and
// Sigmoid stay in the caller's epilogue.
struct PackedRowOutput {
  const float* bias = nullptr;
  ConvEpilogue act;

  static bool FusesActivation(ConvActivation kind) {
    return kind == ConvActivation::kNone || kind == ConvActivation::kRelu ||
           kind == ConvActivation::kClip;
  }
};

// Whether PackedGemm runs its 12 x 16 AVX-512 micro-kernel (micro_kernel_12x16.h) on
// this CPU: x86-64 with the AVX-512 subsets of x86-64-v4.
bool PackedGemmUsesAvx512();

// Floats of scratch PackedGemm needs for an M x N x K product: one slab of the unpacked
// operand per thread that may work on it.
int64_t PackedGemmScratchFloats(const PackedMatrix& packed, int64_t m, int64_t n, int64_t k);

// C[m x n] (row stride ldc) = A x B, or += when `accumulate`, with one of A and B packed
// and the other given by `other` (B when packed is A: other is K x N; A when packed is B:
// other is M x K). `scratch` holds PackedGemmScratchFloats floats. m, n, k > 0; the
// packed operand's dims match. Splits the tiles over ParallelFor (so it must not run
// inside a ParallelFor body with a threaded BLAS; it calls no BLAS itself).
void PackedGemm(const PackedMatrix& packed, MatrixRef other, int64_t m, int64_t n, int64_t k,
                float* c, int64_t ldc, bool accumulate, float* scratch, PackedEpilogue epilogue);

// The same with `out` applied to every tile of C before its store (after the sum and, when
// `accumulate`, after C's old value is added), and `epilogue` called afterwards as above.
void PackedGemm(const PackedMatrix& packed, MatrixRef other, int64_t m, int64_t n, int64_t k,
                float* c, int64_t ldc, bool accumulate, float* scratch,
                const PackedRowOutput& out, PackedEpilogue epilogue);

}  // namespace ndserve::kernels::cpu

#endif  // NDSERVE_KERNELS_CPU_PACKED_GEMM_H_
