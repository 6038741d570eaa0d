#include "kernels/cpu/packed_gemm.h"

#include <algorithm>

#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/micro_kernel_12x16.h"
#include "kernels/cpu/micro_kernel_6x16.h"
#include "kernels/cpu/packed_gemv.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/scratch_slots.h"

namespace ndserve::kernels::cpu {
namespace {

using micro::At;
using micro::MicroKernel;
using micro::TileFinish;
using micro::V16;
using micro::V8;

// The streamed operand's slab per task: with the packed operand on the A side, up to
// kSlabCols columns of B (a K block of them is 192 KB, held in L2 while every A panel
// passes over it); on the B side, up to kSlabRows rows of A, against kTaskCols columns
// of packed B (a K block of those is 256 KB, again L2's share).
constexpr int64_t kSlabCols = 12 * kPackNr;
constexpr int64_t kSlabRows = 16 * kPackMr;
constexpr int64_t kTaskCols = 16 * kPackNr;
// A product under this many multiply-adds runs on the calling thread: waking the pool
// costs more than the work (about 10 us of one core).
constexpr int64_t kMinParallelMacs = int64_t{1} << 19;

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Floats of one task's slab (see kSlabCols).
int64_t SlabFloats(PackedMatrix::Side side, int64_t m, int64_t n, int64_t k) {
  const int64_t kb = std::min(k, kPackKc);
  return side == PackedMatrix::Side::kA ? kb * RoundUp(std::min(n, kSlabCols), kPackNr)
                                        : kb * RoundUp(std::min(m, kSlabRows), kPackMr);
}

// Rows [r0, r1) x K block [k0, k0 + kb) of `src` (rows x K) as A panels: panel p's
// element (i, k) at out[p * kPackMr * kb + k * kPackMr + i], zeros past r1.
__attribute__((always_inline)) inline void PackAPanels(MatrixRef src, int64_t r0, int64_t r1,
                                                       int64_t k0, int64_t kb, float* out) {
  for (int64_t i0 = r0; i0 < r1; i0 += kPackMr, out += kPackMr * kb) {
    const int64_t rows = std::min(kPackMr, r1 - i0);
    if (!src.trans) {
      for (int64_t i = 0; i < rows; ++i) {
        const float* s = src.data + (i0 + i) * src.ld + k0;
        for (int64_t k = 0; k < kb; ++k) out[k * kPackMr + i] = s[k];
      }
    } else {
      for (int64_t k = 0; k < kb; ++k) {
        const float* s = src.data + (k0 + k) * src.ld + i0;
        for (int64_t i = 0; i < rows; ++i) out[k * kPackMr + i] = s[i];
      }
    }
    for (int64_t i = rows; i < kPackMr; ++i) {
      for (int64_t k = 0; k < kb; ++k) out[k * kPackMr + i] = 0.0f;
    }
  }
}

// K block [k0, k0 + kb) x columns [c0, c1) of `src` (K x cols) as B panels: panel q's
// element (k, j) at out[q * kPackNr * kb + k * kPackNr + j], zeros past c1.
__attribute__((always_inline)) inline void PackBPanels(MatrixRef src, int64_t c0, int64_t c1,
                                                       int64_t k0, int64_t kb, float* out) {
  for (int64_t j0 = c0; j0 < c1; j0 += kPackNr, out += kPackNr * kb) {
    const int64_t cols = std::min(kPackNr, c1 - j0);
    if (!src.trans && cols == kPackNr) {
      const float* s = src.data + k0 * src.ld + j0;
      for (int64_t k = 0; k < kb; ++k, s += src.ld) {
        *At(out + k * kPackNr) = *At(s);
        *At(out + k * kPackNr + 8) = *At(s + 8);
      }
      continue;
    }
    // A short panel (N = 49's last holds one column): zeros as two vector stores, then
    // the columns (element by element, the fill cost 320 x 49 x 960 an eighth of its time).
    for (int64_t k = 0; k < kb; ++k) {
      float* o = out + k * kPackNr;
      *At(o) = V8{};
      *At(o + 8) = V8{};
      if (!src.trans) {
        const float* s = src.data + (k0 + k) * src.ld + j0;
        for (int64_t j = 0; j < cols; ++j) o[j] = s[j];
      } else {
        for (int64_t j = 0; j < cols; ++j) o[j] = src.data[(j0 + j) * src.ld + k0 + k];
      }
    }
  }
}

struct Product {
  const PackedMatrix* packed;
  MatrixRef other;
  int64_t m, n, k;
  float* c;
  int64_t ldc;
  bool accumulate;
  const PackedRowOutput* out;  // null: the tiles are stored as summed
};

// One task: rows [m0, m1) x columns [n0, n1) of C over all of K, m0 and n0 on panel
// boundaries. The streamed operand's part is packed a K block at a time into `slab`.
// kWide: tiles of 12 rows (two A panels) by the AVX-512 kernel where two panels are left.
// kRowsA (a row-major A against a packed B): A is not packed; the kernel reads its rows
// where they lie (micro::RowsA). Packing them, a transposing copy element by element,
// took a quarter of the GEMM time at mlp b256's K = 64 and 128, where each packed float
// feeds only a few multiply-adds; a 12-row tile's rows are 12 KB at K block 256, in L1
// across the task's columns. A tile that reaches past M has its rows copied into the slab
// (row-major, zero rows after them), so no read goes past A's end. The two sources are two
// instances rather than a branch per tile: both kernels in one loop made GCC keep the
// accumulators on the stack (the pointwise convs ran 3x slower).
template <bool kWide, bool kRowsA>
__attribute__((always_inline)) inline void RunTaskBody(const Product& p, int64_t m0,
                                                       int64_t m1, int64_t n0, int64_t n1,
                                                       float* slab, PackedEpilogue epilogue) {
  constexpr int64_t kMaxRows = kWide ? 2 * kPackMr : kPackMr;
  const bool packed_a = p.packed->side() == PackedMatrix::Side::kA;
  alignas(64) float edge[kMaxRows * kPackNr];
  float edge_bias[kMaxRows] = {};
  TileFinish finish;
  if (p.out != nullptr) finish.lo = p.out->act.lo, finish.hi = p.out->act.hi;
  for (int64_t k0 = 0; k0 < p.k; k0 += kPackKc) {
    const int64_t kb = std::min(kPackKc, p.k - k0);
    const bool accumulate = p.accumulate || k0 > 0, last = k0 + kb == p.k;
    if (packed_a) {
      PackBPanels(p.other, n0, n1, k0, kb, slab);
    } else if (!kRowsA) {
      PackAPanels(p.other, m0, m1, k0, kb, slab);
    }
    int64_t rows = 0;
    for (int64_t i = m0; i < m1; i += rows) {
      const float* ap = packed_a ? p.packed->Panel(k0, kb, i) : slab + (i - m0) * kb;
      rows = std::min(kMaxRows, m1 - i);
      // A 12-row tile's second panel follows its first (zeros past M, as in any panel).
      const bool wide = kWide && rows > kPackMr;
      const int64_t tile_rows = wide ? 2 * kPackMr : kPackMr;
      if (!wide) rows = std::min(rows, kPackMr);
      // A's rows of this tile (RowsA); `other` is B in the packed-A instances.
      const float* a_rows = kRowsA ? p.other.data + i * p.other.ld + k0 : nullptr;
      int64_t lda = p.other.ld;
      if (kRowsA && rows < tile_rows) {
        for (int64_t r = 0; r < tile_rows; ++r) {
          float* dst = slab + r * kb;
          if (r < rows) {
            std::copy(a_rows + r * lda, a_rows + r * lda + kb, dst);
          } else {
            std::fill(dst, dst + kb, 0.0f);
          }
        }
        a_rows = slab;
        lda = kb;
      }
      // The finish, on the last K block only; a short tile's biases through a full copy.
      const TileFinish* fp = nullptr;
      if (last && p.out != nullptr) {
        finish.kind = p.out->act.kind;
        finish.bias = p.out->bias != nullptr ? p.out->bias + i : nullptr;
        if (finish.bias != nullptr && rows < tile_rows) {
          std::copy(finish.bias, finish.bias + rows, edge_bias);
          finish.bias = edge_bias;
        }
        fp = &finish;
      }
      for (int64_t j = n0; j < n1; j += kPackNr) {
        const float* bp = packed_a ? slab + (j - n0) * kb : p.packed->Panel(k0, kb, j);
        const int64_t cols = std::min(kPackNr, n1 - j);
        float* ct = p.c + i * p.ldc + j;
        // B's rows are its panel's, 16 floats apart.
        const auto brow = [bp](int64_t k) { return bp + k * kPackNr; };
        // Inlined: a lambda is not compiled for its enclosing function's target.
        auto kernel = [&](float* c, int64_t ldc) __attribute__((always_inline)) {
          if constexpr (kRowsA) {
            const micro::RowsA ar(a_rows, lda, tile_rows);
            if constexpr (kWide) {
              if (wide && cols > kPackNr / 2) {
                return micro::MicroKernel12From<V16>(kb, ar, brow, c, ldc, accumulate, fp);
              }
              if (wide) return micro::MicroKernel12From<V8>(kb, ar, brow, c, ldc, accumulate, fp);
            }
            return micro::MicroKernelFrom(kb, ar, brow, c, ldc, accumulate, fp);
          } else {
            if constexpr (kWide) {
              if (wide && cols > kPackNr / 2) {
                return micro::MicroKernel12<V16>(kb, ap, ap + kPackMr * kb, brow, c, ldc,
                                                 accumulate, fp);
              }
              if (wide) {
                return micro::MicroKernel12<V8>(kb, ap, ap + kPackMr * kb, brow, c, ldc,
                                                accumulate, fp);
              }
            }
            MicroKernel(kb, ap, brow, c, ldc, accumulate, fp);
          }
        };
        if (rows == tile_rows && cols == kPackNr) {
          kernel(ct, p.ldc);
          continue;
        }
        // An edge tile: through a full-size copy, so the kernel never reads or writes
        // past C's rows and columns.
        if (accumulate) {
          for (int64_t r = 0; r < rows; ++r) {
            std::copy(ct + r * p.ldc, ct + r * p.ldc + cols, edge + r * kPackNr);
          }
        }
        kernel(edge, kPackNr);
        for (int64_t r = 0; r < rows; ++r) {
          std::copy(edge + r * kPackNr, edge + r * kPackNr + cols, ct + r * p.ldc);
        }
      }
      if (last) epilogue(i, i + rows, n0, n1);
    }
  }
}

// Whether A's rows are read in place (RunTaskBody's kRowsA).
bool RowsInPlace(const Product& p) {
  return p.packed->side() == PackedMatrix::Side::kB && !p.other.trans;
}

NDS_CPU_CLONES
void RunTask(const Product& p, int64_t m0, int64_t m1, int64_t n0, int64_t n1, float* slab,
             PackedEpilogue epilogue) {
  if (RowsInPlace(p)) return RunTaskBody<false, true>(p, m0, m1, n0, n1, slab, epilogue);
  RunTaskBody<false, false>(p, m0, m1, n0, n1, slab, epilogue);
}

#if defined(__x86_64__)
__attribute__((target("arch=x86-64-v4"))) void RunTaskAvx512(const Product& p, int64_t m0,
                                                             int64_t m1, int64_t n0,
                                                             int64_t n1, float* slab,
                                                             PackedEpilogue epilogue) {
  if (RowsInPlace(p)) return RunTaskBody<true, true>(p, m0, m1, n0, n1, slab, epilogue);
  RunTaskBody<true, false>(p, m0, m1, n0, n1, slab, epilogue);
}
#endif

}  // namespace

PackedMatrix PackedMatrix::Pack(Side side, MatrixRef src, int64_t rows, int64_t cols) {
  PackedMatrix p;
  p.side_ = side;
  p.rows_ = rows;
  p.cols_ = cols;
  const int64_t k = side == Side::kA ? cols : rows;
  const int64_t other = side == Side::kA ? rows : cols;
  p.padded_ = RoundUp(other, side == Side::kA ? kPackMr : kPackNr);
  p.data_.assign(p.padded_ * k, 0.0f);
  for (int64_t k0 = 0; k0 < k; k0 += kPackKc) {
    const int64_t kb = std::min(kPackKc, k - k0);
    float* out = p.data_.data() + k0 * p.padded_;
    if (side == Side::kA) {
      PackAPanels(src, 0, rows, k0, kb, out);
    } else {
      PackBPanels(src, 0, cols, k0, kb, out);
    }
  }
  return p;
}

int64_t PackedMatrix::bytes() const {
  return static_cast<int64_t>(data_.size() * sizeof(float)) +
         (winograd_ != nullptr ? winograd_->bytes() : 0);
}

const float* PackedMatrix::Panel(int64_t k0, int64_t kb, int64_t index) const {
  // Every K block before this one is kPackKc deep: block k0 starts at k0 * padded_.
  return data_.data() + k0 * padded_ + index * kb;
}

bool PackedGemmUsesAvx512() {
#if defined(__x86_64__)
  // What target("arch=x86-64-v4") may use.
  static const bool has = __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512cd");
  return has;
#else
  return false;
#endif
}

int64_t PackedGemmScratchFloats(const PackedMatrix& packed, int64_t m, int64_t n, int64_t k) {
  return ScratchSlots::Count() * SlabFloats(packed.side(), m, n, k);
}

void PackedGemm(const PackedMatrix& packed, MatrixRef other, int64_t m, int64_t n, int64_t k,
                float* c, int64_t ldc, bool accumulate, float* scratch, PackedEpilogue epilogue) {
  PackedGemm(packed, other, m, n, k, c, ldc, accumulate, scratch, PackedRowOutput{}, epilogue);
}

void PackedGemm(const PackedMatrix& packed, MatrixRef other, int64_t m, int64_t n, int64_t k,
                float* c, int64_t ldc, bool accumulate, float* scratch,
                const PackedRowOutput& out, PackedEpilogue epilogue) {
  const bool packed_a = packed.side() == PackedMatrix::Side::kA;
  if (!packed_a && m > 0 && m <= kPackedGemvMaxRows && out.bias == nullptr &&
      out.act.kind == ConvActivation::kNone) {
    return PackedGemv(packed, other, m, n, k, c, ldc, accumulate, epilogue);
  }
  const int threads = IntraOpThreads();
  // Task blocks: the streamed operand's slab on one side, the packed operand's rows
  // (all of them for A, kTaskCols columns for B) on the other. Column blocks split C's
  // 16-wide panels evenly, so no block is a sliver of another (N = 196 in two is
  // 112 + 84, not 192 + 4, whose thread would idle at the join).
  const int64_t panels = (n + kPackNr - 1) / kPackNr;
  int64_t mb = packed_a ? RoundUp(m, kPackMr) : kSlabRows;
  const int64_t block_cols = packed_a ? kSlabCols : kTaskCols;
  int64_t n_tasks = (n + block_cols - 1) / block_cols;
  if (packed_a) {
    // At least four column blocks per thread while each keeps 64 columns: a pointwise
    // conv's N = 784 in five blocks of 160 left one thread three and the other two.
    n_tasks = std::max(n_tasks, std::min<int64_t>(4 * threads, (n + 63) / 64));
  }
  // Fewer tasks than two per thread: cut the blocks, so each thread has work and a
  // thread slowed by other load hands its share on.
  const int64_t want = 2 * threads;
  if (threads > 1 && ((m + mb - 1) / mb) * n_tasks < want) {
    if (packed_a) {
      const int64_t parts = (want + n_tasks - 1) / n_tasks;
      mb = std::clamp(RoundUp((m + parts - 1) / parts, kPackMr), kPackMr, mb);
    }
    const int64_t m_blocks = (m + mb - 1) / mb;
    if (m_blocks * n_tasks < want) n_tasks = (want + m_blocks - 1) / m_blocks;
  }
  n_tasks = std::min(n_tasks, panels);
  const int64_t m_tasks = (m + mb - 1) / mb;
  auto col = [&](int64_t block) { return std::min(n, block * panels / n_tasks * kPackNr); };
  const bool finishes = out.bias != nullptr || out.act.kind != ConvActivation::kNone;
  const Product p{&packed, other, m, n, k, c, ldc, accumulate, finishes ? &out : nullptr};
  const int64_t slab = SlabFloats(packed.side(), m, n, k);
  ScratchSlots slots;
  const bool wide = PackedGemmUsesAvx512();
  const int64_t task_macs = mb * ((panels + n_tasks - 1) / n_tasks) * kPackNr * k;
  ParallelFor(m_tasks * n_tasks, (kMinParallelMacs + task_macs - 1) / task_macs,
              [&](int64_t t0, int64_t t1) {
                const int s = slots.Claim();
                for (int64_t t = t0; t < t1; ++t) {
                  const int64_t m0 = (t / n_tasks) * mb, m1 = std::min(m, m0 + mb);
                  const int64_t n0 = col(t % n_tasks), n1 = col(t % n_tasks + 1);
                  if (wide) {
#if defined(__x86_64__)
                    RunTaskAvx512(p, m0, m1, n0, n1, scratch + s * slab, epilogue);
#endif
                  } else {
                    RunTask(p, m0, m1, n0, n1, scratch + s * slab, epilogue);
                  }
                }
                slots.Release(s);
              });
}

}  // namespace ndserve::kernels::cpu
