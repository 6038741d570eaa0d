#ifndef NDSERVE_KERNELS_CPU_MICRO_KERNEL_6X16_H_
#define NDSERVE_KERNELS_CPU_MICRO_KERNEL_6X16_H_

// The 6 x 16 micro-kernel of PackedGemm (B from its packed panels, packed_gemm.cc), the
// direct conv (B rows read in place from the padded image, direct_conv.cc) and the
// Winograd conv (B from its transformed tiles, winograd_conv.cc). Twelve accumulators,
// two B vectors and one broadcast A value: 15 of AVX2's 16 registers, two FMAs per B
// load. PackedGemm may also finish a tile in its registers (bias and Relu/Clip, TileFinish)
// before the one store. Inlined into each caller's NDS_CPU_CLONES function, so it is
// compiled for AVX2 + FMA there.

#include <cstdint>

#include "kernels/conv_activation.h"
#include "kernels/cpu/packed_gemm.h"

namespace ndserve::kernels::cpu::micro {

// Eight floats as one value (GCC vector extension), as in row_gemm.cc: an AVX register in
// the x86-64-v3 clone, two SSE registers in the baseline one.
typedef float V8 __attribute__((vector_size(32)));
typedef float V8u __attribute__((vector_size(32), aligned(4), may_alias));

// The lambdas below are always_inline: an outlined one is built for the baseline ISA
// (not for its caller's clone), and GCC outlined StoreTile12's once the task loop had two
// instances (packed_gemm.cc), storing every tile through SSE.
// Only pointers to vectors cross function boundaries (a vector passed by value has
// different ABIs with and without AVX).
inline const V8u* At(const float* p) { return reinterpret_cast<const V8u*>(p); }
inline V8u* At(float* p) { return reinterpret_cast<V8u*>(p); }
// x in every lane: one vbroadcastss from memory. (V8{} + x adds 0.0f first, which is no
// identity for -0.0f, so GCC keeps a scalar add in front of every broadcast: half the
// micro-kernel's speed.)
#define NDS_SPLAT(x) (V8{(x), (x), (x), (x), (x), (x), (x), (x)})

// A tile's finish in registers (PackedRowOutput) after its last K block: `bias` the tile's
// kPackMr row biases (null: none), then the activation.
struct TileFinish {
  const float* bias = nullptr;
  ConvActivation kind = ConvActivation::kNone;
  float lo = 0.0f, hi = 0.0f;  // kClip's bounds
};

// The activations lane by lane, in place, as the scalar functors of
// kernels/conv_activation.h compute them (NaN stays NaN through Relu and Clip: every
// comparison with it is false). By reference: vectors do not cross calls by value.
template <typename V>
__attribute__((always_inline)) inline void ReluV(V& v) {
  const V zero = {};
  v = v < zero ? zero : v;
}
template <typename V>
__attribute__((always_inline)) inline void ClipV(V& v, const V& lo, const V& hi) {
  v = v < lo ? lo : v;
  v = v > hi ? hi : v;
}
// Applies `f` (not null) to a tile's accumulators: `rows(op)` calls op(v, r, q) on each
// accumulator v, r being the tile row it holds and q its place in the row (constants
// once inlined).
template <typename V, typename Rows>
__attribute__((always_inline)) inline void FinishTile(const TileFinish* f, Rows rows) {
  if (f->bias != nullptr) {
    const float* bias = f->bias;
    rows([bias](V& v, int r, int) __attribute__((always_inline)) { v += bias[r]; });
  }
  switch (f->kind) {
    case ConvActivation::kRelu:
      rows([](V& v, int, int) __attribute__((always_inline)) { ReluV(v); });
      break;
    case ConvActivation::kClip: {
      V lo = {}, hi = {};
      lo += f->lo;
      hi += f->hi;
      rows([&lo, &hi](V& v, int, int) __attribute__((always_inline)) { ClipV(v, lo, hi); });
      break;
    }
    default:
      break;
  }
}

// A tile's end: the twelve accumulators (row r in c<r>0 and c<r>1, one vector V each, at
// c + r * ldc and one vector to its right) plus C's old value when `accumulate`, then
// `f`'s finish when given, then the store.
template <typename V>
__attribute__((always_inline)) inline void StoreTile(float* c, int64_t ldc, bool accumulate,
                                                     const TileFinish* f, V& c00, V& c01, V& c10,
                                                     V& c11, V& c20, V& c21, V& c30, V& c31,
                                                     V& c40, V& c41, V& c50, V& c51) {
  constexpr int64_t w = sizeof(V) / sizeof(float);
  auto rows = [&](auto op) __attribute__((always_inline)) {
    op(c00, 0, 0), op(c01, 0, 1), op(c10, 1, 0), op(c11, 1, 1), op(c20, 2, 0), op(c21, 2, 1);
    op(c30, 3, 0), op(c31, 3, 1), op(c40, 4, 0), op(c41, 4, 1), op(c50, 5, 0), op(c51, 5, 1);
  };
  if (accumulate) {
    rows([&](V& v, int r, int q) __attribute__((always_inline)) {
      V old;
      __builtin_memcpy(&old, c + r * ldc + q * w, sizeof(V));
      v += old;
    });
  }
  if (f != nullptr) FinishTile<V>(f, rows);
  rows([&](V& v, int r, int q) __attribute__((always_inline)) { __builtin_memcpy(c + r * ldc + q * w, &v, sizeof(V)); });
}

// Where a tile's A values come from, k step by k step: get(i) is row i's value at the
// current k, next() moves to the next k.
// PanelA: packed panels (element (i, k) of a panel at k * kPackMr + i), the 12-row
// kernel's rows 6-11 in a second panel `a1`.
struct PanelA {
  const float* a0;
  const float* a1;
  __attribute__((always_inline)) float get(int i) const {
    return i < kPackMr ? a0[i] : a1[i - kPackMr];
  }
  __attribute__((always_inline)) void next() { a0 += kPackMr, a1 += kPackMr; }
};
// RowsA: the rows of a row-major A read where they lie (element (i, k) at a[i * lda + k]),
// so a GEMM whose B was packed at load does not pack A per call (packed_gemm.cc). Four
// row pointers three rows apart, each row at +0, +lda or +2 * lda from one: the
// addresses are base + lda * scale, with no per-row register (11 of them would spill).
struct RowsA {
  const float* r0;
  const float* r3;
  const float* r6;
  const float* r9;
  int64_t lda;
  // `rows` (6 or 12): the tile's rows; a 6-row tile's r6 and r9 are never read and do not
  // point past its rows.
  RowsA(const float* a, int64_t ld, int64_t rows)
      : r0(a),
        r3(a + 3 * ld),
        r6(rows > kPackMr ? a + 6 * ld : a),
        r9(rows > kPackMr ? a + 9 * ld : a),
        lda(ld) {}
  __attribute__((always_inline)) float get(int i) const {
    const float* base = i < 3 ? r0 : (i < 6 ? r3 : (i < 9 ? r6 : r9));
    return base[(i % 3) * lda];
  }
  __attribute__((always_inline)) void next() { ++r0, ++r3, ++r6, ++r9; }
};

// The 6 x 16 tile c (rows ldc floats apart) = finish((accumulate ? c : 0) + A x B over kb
// rows of K), A's six rows from `a` (PanelA or RowsA), where brow(k) points at row k's 16
// floats and finish is `f`'s bias and activation, or nothing when `f` is null (the direct
// and Winograd convs apply theirs after the whole sum). Either A source gives the same
// bits: the same products summed in the same order.
template <typename ASource, typename BRow>
__attribute__((always_inline)) inline void MicroKernelFrom(int64_t kb, ASource a, BRow brow,
                                                           float* c, int64_t ldc,
                                                           bool accumulate,
                                                           const TileFinish* f = nullptr) {
  V8 c00 = {}, c01 = {}, c10 = {}, c11 = {}, c20 = {}, c21 = {};
  V8 c30 = {}, c31 = {}, c40 = {}, c41 = {}, c50 = {}, c51 = {};
  for (int64_t k = 0; k < kb; ++k, a.next()) {
    const float* b = brow(k);
    const V8 b0 = *At(b), b1 = *At(b + 8);
    V8 v = NDS_SPLAT(a.get(0));
    c00 += v * b0;
    c01 += v * b1;
    v = NDS_SPLAT(a.get(1));
    c10 += v * b0;
    c11 += v * b1;
    v = NDS_SPLAT(a.get(2));
    c20 += v * b0;
    c21 += v * b1;
    v = NDS_SPLAT(a.get(3));
    c30 += v * b0;
    c31 += v * b1;
    v = NDS_SPLAT(a.get(4));
    c40 += v * b0;
    c41 += v * b1;
    v = NDS_SPLAT(a.get(5));
    c50 += v * b0;
    c51 += v * b1;
  }
  // Copies: the accumulators' own addresses never reach StoreTile's lambdas, or GCC may
  // keep them in memory through the loop (it did with RowsA in the 12-row kernel).
  V8 d00 = c00, d01 = c01, d10 = c10, d11 = c11, d20 = c20, d21 = c21;
  V8 d30 = c30, d31 = c31, d40 = c40, d41 = c41, d50 = c50, d51 = c51;
  StoreTile(c, ldc, accumulate, f, d00, d01, d10, d11, d20, d21, d30, d31, d40, d41, d50, d51);
}

// MicroKernelFrom with A one packed panel.
template <typename BRow>
__attribute__((always_inline)) inline void MicroKernel(int64_t kb, const float* a, BRow brow,
                                                       float* c, int64_t ldc, bool accumulate,
                                                       const TileFinish* f = nullptr) {
  MicroKernelFrom(kb, PanelA{a, a}, brow, c, ldc, accumulate, f);
}

}  // namespace ndserve::kernels::cpu::micro

#endif  // NDSERVE_KERNELS_CPU_MICRO_KERNEL_6X16_H_
